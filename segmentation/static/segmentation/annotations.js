// The masks the page holds: per frame, per object, the COCO RLE the server sent (from clicks,
// the propagation stream or an imported file), and their export format, the one
// `uploadAnnotations` takes: {"video", "frames": [{"frame_index", "objects": [{"object_id",
// "mask": {"size", "counts"}, "points"?, "labels"?}]}]}, frames in order, non-empty masks only
// (and the masks of clicked objects, with their clicks).

import { rleDecode, rleIsEmpty } from "./rle.js";

const DECODED_FRAMES_KEPT = 64;

export class Annotations {
  constructor(videoPath) {
    this.videoPath = videoPath;
    this.frames = new Map(); // frame index -> Map(object ID -> {size, counts, empty})
    this.decoded = new Map(); // frame index -> Map(object ID -> Uint8Array), recently used last
  }

  // Each listed object's mask on the frame replaces the one held; others stay.
  setMasks(frameIndex, masks /* [{objectId, rle}] */) {
    const frame = this.frames.get(frameIndex) ?? new Map();
    for (const { objectId, rle } of masks) {
      frame.set(objectId, { size: rle.size, counts: rle.counts, empty: rleIsEmpty(rle) });
    }
    this.frames.set(frameIndex, frame);
    this.decoded.delete(frameIndex);
  }

  // Decoded masks of the frame, {objectId: Uint8Array row-major}, empty ones left out.
  masks(frameIndex) {
    let decoded = this.decoded.get(frameIndex);
    if (decoded) {
      this.decoded.delete(frameIndex);
    } else {
      decoded = new Map();
      for (const [objectId, rle] of this.frames.get(frameIndex) ?? []) {
        if (!rle.empty) decoded.set(objectId, rleDecode(rle));
      }
    }
    this.decoded.set(frameIndex, decoded);
    if (this.decoded.size > DECODED_FRAMES_KEPT) this.decoded.delete(this.decoded.keys().next().value);
    return decoded;
  }

  // The object's mask on the frame as the server sent it, {size, counts}; null if none is held.
  rle(frameIndex, objectId) {
    const rle = this.frames.get(frameIndex)?.get(objectId);
    return rle ? { size: rle.size, counts: rle.counts } : null;
  }

  hasMasks(frameIndex) {
    return [...(this.frames.get(frameIndex)?.values() ?? [])].some((rle) => !rle.empty);
  }

  objectIds() {
    const ids = new Set();
    for (const frame of this.frames.values()) for (const id of frame.keys()) ids.add(id);
    return [...ids].sort((a, b) => a - b);
  }

  removeObject(objectId) {
    for (const frame of this.frames.values()) frame.delete(objectId);
    this.decoded.clear();
  }

  clear() {
    this.frames.clear();
    this.decoded.clear();
  }

  // `clicks(frameIndex, objectId)` gives an object's clicks on a frame, {points, labels} as
  // addPoints takes them, or null: they go beside its mask (kept even if empty), so that an
  // import gives back the work.
  toJSON(clicks = () => null) {
    const frames = [...this.frames.keys()]
      .sort((a, b) => a - b)
      .map((frameIndex) => ({
        frame_index: frameIndex,
        objects: [...this.frames.get(frameIndex)]
          .map(([objectId, rle]) => [objectId, rle, clicks(frameIndex, objectId)])
          .filter(([, rle, clicked]) => !rle.empty || clicked)
          .sort(([a], [b]) => a - b)
          .map(([objectId, rle, clicked]) => ({
            object_id: objectId,
            mask: { size: rle.size, counts: rle.counts },
            ...(clicked ?? {}),
          })),
      }))
      .filter((frame) => frame.objects.length);
    return { video: this.videoPath, frames };
  }

  // Replace every mask with those of an export file (already checked by the server).
  load(data) {
    this.clear();
    for (const frame of data.frames) {
      this.setMasks(
        frame.frame_index,
        frame.objects.map((item) => ({ objectId: item.object_id, rle: item.mask })),
      );
    }
  }
}
