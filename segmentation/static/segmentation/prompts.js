// The page's prompts: each object's clicks and box per frame, keyed "frame:object", in video
// pixels, and the imported masks without clicks; read here as the frames they are on.

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

// The frames where any object has a prompt (clicks, a box, an imported mask), in order.
export function promptFrames() {
  const frames = new Set([...state.points.keys(), ...state.given].map((key) => Number(key.split(":")[0])));
  return [...frames].sort((a, b) => a - b);
}
