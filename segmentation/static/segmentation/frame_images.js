// The video's frames as the engine sees them: JPEG files the server decodes once per frame
// index (GET /frames/<index>.jpg?video=<path>), fetched ahead of need. The page keeps the
// compressed files (tens of kB each) and decodes one when it is shown, so even a long video's
// frames fit in memory.

import { pageFrames } from "./frame_numbers.js";

const KEPT = 600;

export class FrameImages {
  constructor(videoPath) {
    this.videoPath = videoPath;
    this.files = new Map(); // frame index -> Promise<Blob>, recently used last
  }

  url(frameIndex) {
    return `/frames/${frameIndex}.jpg?video=${encodeURIComponent(this.videoPath)}`;
  }

  // The frame, decoded: an ImageBitmap the caller closes once drawn.
  async get(frameIndex) {
    return createImageBitmap(await this.file(frameIndex));
  }

  // Start fetching the frames from..from+count-1 that are not held yet.
  prefetch(from, count, frameCount) {
    for (let i = from; i < Math.min(from + count, frameCount); i++) {
      if (!this.files.has(i)) this.file(i).catch(() => {});
    }
  }

  file(frameIndex) {
    let file = this.files.get(frameIndex);
    if (file) {
      this.files.delete(frameIndex);
    } else {
      file = this.fetch(frameIndex);
      file.catch(() => this.files.delete(frameIndex)); // a failed fetch is tried again later
    }
    this.files.set(frameIndex, file);
    while (this.files.size > KEPT) this.files.delete(this.files.keys().next().value);
    return file;
  }

  async fetch(frameIndex) {
    const response = await fetch(this.url(frameIndex));
    if (!response.ok) {
      const body = await response.json().catch(() => ({}));
      throw new Error(pageFrames(body.error) ?? `frame ${frameIndex + 1} could not be loaded (${response.status})`);
    }
    return response.blob();
  }
}
