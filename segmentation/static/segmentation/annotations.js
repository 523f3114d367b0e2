// The masks the page holds: a bounded window of frames around the one shown, as the server sent
// them (COCO RLE per frame and object), and which frames have masks across the whole video, as
// runs. The session keeps every mask in its store on the server (docs/segmentation-api.md); the
// page reads the frames near the one shown from it (GET /sessions/<id>/work/masks) ahead of
// need, a chunk of frames at a time, and lets go of those out of reach, so nothing it holds
// grows with the video's length. Masks that come from clicks update the window and the runs as
// they arrive; the frames a propagation job stores are read from the store as it goes.

import { Runs } from "./mask_runs.js";
import { rleDecode, rleIsEmpty } from "./rle.js";
import { state } from "./state.js";

const CHUNK_FRAMES = 120; // frames per read of the store (the server takes at most 240)
export const READ_FRAMES_MAX = 240; // the most frames one read of the store may ask for
const CHUNKS_BEHIND = 1; // chunks kept before the shown frame's, and read ahead after it
const CHUNKS_AHEAD = 2;
const DECODED_FRAMES_KEPT = 64;

export class Annotations {
  constructor() {
    this.frames = new Map(); // frame index -> Map(object ID -> {size, counts, empty}): the window
    this.decoded = new Map(); // frame index -> Map(object ID -> Uint8Array), recently used last
    this.runs = new Map(); // object ID -> Runs: the frames with its mask, across the video
    this.chunks = new Map(); // chunk index -> "loaded", or the Set of frames set while it loads
    this.centre = 0; // the chunk of the frame shown
    this.epoch = 0; // counts resets: a read started before one is not taken
  }

  // The whole work as the store's summary gives it: each object's masked frames as runs. The
  // window is read again from the store.
  reset(objects /* [{object_id, mask_runs}] */ = []) {
    this.epoch++;
    this.frames.clear();
    this.decoded.clear();
    this.chunks.clear();
    this.runs = new Map(objects.map((item) => [item.object_id, new Runs(item.mask_runs)]));
  }

  // Each listed object's mask on the frame replaces the one held; others stay.
  setMasks(frameIndex, masks /* [{objectId, rle}] */) {
    for (const { objectId, rle } of masks) {
      if (!this.runs.has(objectId)) this.runs.set(objectId, new Runs());
      const empty = rleIsEmpty(rle);
      if (empty) this.runs.get(objectId).delete(frameIndex);
      else this.runs.get(objectId).add(frameIndex);
      if (!this.inWindow(frameIndex)) continue;
      const frame = this.frames.get(frameIndex) ?? new Map();
      frame.set(objectId, { size: rle.size, counts: rle.counts, empty });
      this.frames.set(frameIndex, frame);
    }
    this.chunkLoading(frameIndex)?.add(frameIndex); // newer than the store's answer on its way
    this.decoded.delete(frameIndex);
  }

  // Decoded masks of the frame, {objectId: Uint8Array row-major}, empty ones left out; none for
  // a frame outside the window.
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

  // The frames where any object has a mask.
  masked() {
    return Runs.union([...this.runs.values()]);
  }

  removeObject(objectId) {
    this.runs.delete(objectId);
    for (const frame of this.frames.values()) frame.delete(objectId);
    this.decoded.clear();
  }

  // Every mask is gone (the person cleared everything): the window is known to be empty, so
  // no read of the store made before the server hears of it brings them back.
  clear() {
    this.reset();
    for (let chunk = this.centre - CHUNKS_BEHIND; chunk <= this.centre + CHUNKS_AHEAD; chunk++) {
      this.chunks.set(chunk, "loaded");
    }
  }

  // Move the window to the frame shown: the chunks out of reach go, the frame's chunk is read
  // from the store if it is not held (the promise settles when it is), and its neighbours are
  // read ahead.
  show(frameIndex) {
    const centre = Math.floor(frameIndex / CHUNK_FRAMES);
    this.centre = centre;
    for (const chunk of [...this.chunks.keys()]) if (!this.chunkInWindow(chunk)) this.chunks.delete(chunk);
    for (const index of [...this.frames.keys()]) {
      if (!this.inWindow(index)) {
        this.frames.delete(index);
        this.decoded.delete(index);
      }
    }
    const shown = this.load(centre);
    for (let chunk = centre - CHUNKS_BEHIND; chunk <= centre + CHUNKS_AHEAD; chunk++) {
      if (chunk !== centre) this.load(chunk);
    }
    return shown;
  }

  inWindow(frameIndex) {
    return this.chunkInWindow(Math.floor(frameIndex / CHUNK_FRAMES));
  }

  chunkInWindow(chunk) {
    return chunk >= this.centre - CHUNKS_BEHIND && chunk <= this.centre + CHUNKS_AHEAD;
  }

  chunkLoading(frameIndex) {
    const loading = this.chunks.get(Math.floor(frameIndex / CHUNK_FRAMES));
    return loading instanceof Set ? loading : null;
  }

  // Read the chunk's masks from the store, unless held or on their way. Frames set meanwhile
  // (a click's answer, a propagated frame) are newer than the read, and stay.
  async load(chunk) {
    const first = chunk * CHUNK_FRAMES;
    const last = Math.min(first + CHUNK_FRAMES, state.video.frameCount) - 1;
    if (first > last || chunk < 0 || this.chunks.has(chunk) || !state.sessionId) return;
    const setMeanwhile = new Set();
    const epoch = this.epoch;
    this.chunks.set(chunk, setMeanwhile);
    let body;
    try {
      body = await readStore(first, last);
    } catch (error) {
      if (this.chunks.get(chunk) === setMeanwhile) this.chunks.delete(chunk); // read again later
      throw error;
    }
    if (epoch !== this.epoch || this.chunks.get(chunk) !== setMeanwhile) return; // out of reach now
    this.chunks.set(chunk, "loaded");
    if (!body.kept) return; // a session that keeps no work: the page holds what it was sent
    const stored = storedFrames(body);
    for (let index = first; index <= last; index++) {
      if (!setMeanwhile.has(index)) this.hold(index, stored.get(index) ?? []);
    }
  }

  // The frames first..last (at most the server's 240 frames) read again from the store, where
  // a propagation job has stored them since: each object's runs follow what the store holds
  // there now, and the frames in the window are held.
  async refresh(first, last) {
    const epoch = this.epoch;
    const body = await readStore(first, last);
    if (epoch !== this.epoch || !body.kept) return;
    const stored = storedFrames(body);
    for (let index = first; index <= last; index++) {
      const masks = stored.get(index) ?? [];
      for (const objectId of state.objects) {
        if (!this.runs.has(objectId)) this.runs.set(objectId, new Runs());
        if (masks.some((item) => item.object_id === objectId)) this.runs.get(objectId).add(index);
        else this.runs.get(objectId).delete(index);
      }
      if (!this.inWindow(index)) continue;
      this.chunkLoading(index)?.add(index); // newer than a read of its chunk on its way
      this.hold(index, masks);
    }
  }

  // The frame's masks as the store has them (those of objects the page no longer has left out).
  hold(index, masks /* [{object_id, counts}] */) {
    const { width, height } = state.video;
    const kept = masks.filter((item) => state.objects.includes(item.object_id));
    if (!kept.length) {
      this.frames.delete(index);
    } else {
      const rle = (counts) => ({ size: [height, width], counts, empty: false });
      this.frames.set(index, new Map(kept.map((item) => [item.object_id, rle(item.counts)])));
    }
    this.decoded.delete(index);
  }

  // What the page holds, for tests: masks of how many frames, decoded how many.
  held() {
    return { maskFrames: this.frames.size, decodedFrames: this.decoded.size, chunks: this.chunks.size };
  }
}

// The stored masks of the frames first..last: {kept, frames: [{frame_index, masks}]}.
async function readStore(first, last) {
  const address = `/sessions/${encodeURIComponent(state.sessionId)}/work/masks?first=${first}&last=${last}`;
  const response = await fetch(address);
  if (!response.ok) {
    throw Object.assign(new Error(`the masks could not be read (${response.status})`), { status: response.status });
  }
  return response.json();
}

function storedFrames(body) {
  return new Map(body.frames.map((frame) => [frame.frame_index, frame.masks]));
}
