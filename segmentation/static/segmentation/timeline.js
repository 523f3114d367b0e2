// The timeline under the frame, across the whole video however long: where there are masks and
// prompts, the frame shown, and the frames a propagation would reach; a click on it names a
// frame. It is drawn from runs of frames (mask_runs.js), a rectangle a run, never a column a
// frame, so an hour of frames costs what a few runs cost.

import { ui } from "./elements.js";
import { objectColour } from "./object_colours.js";
import { hexOf } from "./overlay.js";
import { anchors, promptFrames } from "./prompts.js";
import { state } from "./state.js";

// The timeline: a low bar where there are masks (dimmed, while a propagation runs, where it has
// not reached yet), a short mark on every frame with a prompt, a tall one in its colour on the
// selected object's clicked frames, and the frame shown. Its data attributes say what it drew,
// in frame indices: `masked` (how many frames), `maskRuns` ("0-11,40-40"), `prompted` and
// `anchors` (the selected object's).
export function drawTimeline() {
  const canvas = ui.timeline;
  const count = state.video.frameCount;
  canvas.width = Math.max(canvas.clientWidth, 1);
  const context = canvas.getContext("2d");
  context.clearRect(0, 0, canvas.width, canvas.height);
  const step = canvas.width / count;
  const span = (first, last, top, minimum) =>
    context.fillRect(first * step, top, Math.max((last - first + 1) * step, minimum), canvas.height - top);
  const masked = state.annotations.masked();
  const reached = state.propagated;
  const bright = reached ? masked.split(reached, true) : masked;
  if (reached) {
    context.fillStyle = "#27506f";
    for (const [first, last] of masked.split(reached, false).runs) span(first, last, 8, 1);
  }
  context.fillStyle = "#4fa3ff";
  for (const [first, last] of bright.runs) span(first, last, 8, 1);
  const prompted = promptFrames();
  context.fillStyle = "#8a949e";
  for (const frameIndex of prompted) span(frameIndex, frameIndex, 5, 2);
  const selected = anchors(state.selected);
  context.fillStyle = hexOf(objectColour(state.selected));
  for (const frameIndex of selected) span(frameIndex, frameIndex, 0, 3);
  context.fillStyle = "#ffffff";
  context.fillRect((state.frameIndex + 0.5) * step - 1, 0, 2, canvas.height);
  canvas.dataset.anchors = selected.join(",");
  canvas.dataset.prompted = prompted.join(",");
  canvas.dataset.masked = masked.size;
  canvas.dataset.maskRuns = masked.toString();
  drawRange(context, step);
}

// The frames a propagation from the frame shown would reach, as the server counts them (see
// docs/segmentation-api.md): [first, last], inclusive.
function propagationRange() {
  const start = state.frameIndex;
  const last = state.video.frameCount - 1;
  const end = state.endFrame;
  const direction = ui.direction.value;
  if (direction === "forward") return [start, end ?? last];
  if (direction === "backward") return [end ?? 0, start];
  if (end === null) return [0, last];
  const reach = Math.abs(end - start); // both ways, as SAM 2's max_frame_num_to_track
  return [Math.max(start - reach, 0), Math.min(start + reach, last)];
}

// The range on the timeline: a thin band over the frames it reaches (shown once it is narrower
// than the whole video) and the marked end, a tall amber mark.
function drawRange(context, step) {
  const canvas = ui.timeline;
  const [first, last] = propagationRange();
  canvas.dataset.range = `${first}-${last}`;
  canvas.dataset.end = state.endFrame ?? "";
  context.fillStyle = "#ffb020";
  if (first > 0 || last < state.video.frameCount - 1) {
    context.fillRect(first * step, 0, (last - first + 1) * step, 2);
  }
  if (state.endFrame !== null) context.fillRect(state.endFrame * step, 0, Math.max(step, 3), canvas.height);
}

export function timelineFrame(event) {
  const box = ui.timeline.getBoundingClientRect();
  return Math.floor(((event.clientX - box.left) * state.video.frameCount) / box.width);
}
