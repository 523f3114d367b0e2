// The video's frames as the engine sees them: JPEG files the server decodes once per frame
// index (GET /frames/<index>.jpg?video=<path>), loaded ahead of need and kept decoded.

const KEPT = 96;

export class FrameImages {
  constructor(videoPath) {
    this.videoPath = videoPath;
    this.images = new Map(); // frame index -> Promise<ImageBitmap>, recently used last
  }

  url(frameIndex) {
    return `/frames/${frameIndex}.jpg?video=${encodeURIComponent(this.videoPath)}`;
  }

  get(frameIndex) {
    let image = this.images.get(frameIndex);
    if (image) {
      this.images.delete(frameIndex);
    } else {
      image = this.load(frameIndex);
      image.catch(() => this.images.delete(frameIndex)); // a failed load is tried again later
    }
    this.images.set(frameIndex, image);
    while (this.images.size > KEPT) this.images.delete(this.images.keys().next().value);
    return image;
  }

  // Start loading the frames from..from+count-1 that are not held yet.
  prefetch(from, count, frameCount) {
    for (let i = from; i < Math.min(from + count, frameCount); i++) {
      if (!this.images.has(i)) this.get(i).catch(() => {});
    }
  }

  async load(frameIndex) {
    const response = await fetch(this.url(frameIndex));
    if (!response.ok) {
      const body = await response.json().catch(() => ({}));
      throw new Error(body.error ?? `frame ${frameIndex} could not be loaded (${response.status})`);
    }
    return createImageBitmap(await response.blob());
  }
}
