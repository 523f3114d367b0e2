// The page's prompts: each object's clicks and box per frame, keyed "frame:object", in video
// pixels, and the imported masks without clicks. Read here as the frames an object is clicked
// on, and converted to and from annotation files (normalised points, as addPoints takes them).

import { rleEmpty } from "./rle.js";
import { state } from "./state.js";

export function pointKey(frameIndex, objectId) {
  return `${frameIndex}:${objectId}`;
}

// The frames where the object has points, in order: its anchors.
export function anchors(objectId) {
  const frames = [];
  for (const key of state.points.keys()) {
    const [frameIndex, id] = key.split(":").map(Number);
    if (id === objectId) frames.push(frameIndex);
  }
  return frames.sort((a, b) => a - b);
}

// An object's clicks on a frame as addPoints takes them (prompt_edits.js's sendPoints), for the
// export and a replay.
export function clicksOf(frameIndex, objectId) {
  const points = state.points.get(pointKey(frameIndex, objectId));
  if (!points?.length) return null;
  const { width, height } = state.video;
  return { points: points.map((p) => [p.x / width, p.y / height]), labels: points.map((p) => p.label) };
}

// An annotation file's prompts as the page keeps them: the clicks per "frame:object" in video
// pixels, and the keys of masks without clicks.
export function promptsOf(data) {
  const { width, height } = state.video;
  const points = new Map();
  const given = new Set();
  for (const frame of data.frames) {
    for (const item of frame.objects) {
      const key = pointKey(frame.frame_index, item.object_id);
      if (!item.points) given.add(key);
      else points.set(key, item.points.map(([x, y], i) => ({ x: x * width, y: y * height, label: item.labels[i] })));
    }
  }
  return { points, given };
}

// The page's work as an annotation file, for a new session to be given: each object's clicks on
// a frame (beside the mask the page shows there, or an empty one: the clicks are the prompt), and
// the imported masks without clicks (state.given), which only the lost session held as prompts.
export function replayWork() {
  const { width, height } = state.video;
  const frames = new Map();
  const keys = [...state.points.keys(), ...[...state.given].filter((key) => !state.points.has(key))];
  for (const key of keys) {
    const [frameIndex, objectId] = key.split(":").map(Number);
    const mask = state.annotations.rle(frameIndex, objectId);
    const clicked = clicksOf(frameIndex, objectId);
    if (!clicked && !mask) continue;
    if (!frames.has(frameIndex)) frames.set(frameIndex, []);
    frames.get(frameIndex).push({ object_id: objectId, mask: mask ?? rleEmpty(height, width), ...(clicked ?? {}) });
  }
  return {
    video: state.video.path,
    frames: [...frames]
      .sort(([a], [b]) => a - b)
      .map(([frameIndex, objects]) => ({
        frame_index: frameIndex,
        objects: objects.sort((a, b) => a.object_id - b.object_id),
      })),
  };
}
