// The timeline under the frame, one column a frame: where there are masks and clicks, the frame
// shown, and the frames a propagation would reach; a click on it names a frame.

import { ui } from "./elements.js";
import { objectColour } from "./object_colours.js";
import { hexOf } from "./overlay.js";
import { anchors } from "./prompts.js";
import { state } from "./state.js";

// The timeline, one column a frame: a low bar where there are masks (dimmed, while a propagation
// runs, where it has not reached yet), a short mark on every clicked frame, a tall one in its
// colour on the selected object's, and the frame shown.
export function drawTimeline() {
  const canvas = ui.timeline;
  const count = state.video.frameCount;
  canvas.width = Math.max(canvas.clientWidth, 1);
  const context = canvas.getContext("2d");
  context.clearRect(0, 0, canvas.width, canvas.height);
  const step = canvas.width / count;
  const column = (frameIndex, top, minimum) =>
    context.fillRect(frameIndex * step, top, Math.max(step, minimum), canvas.height - top);
  let masked = 0;
  for (let i = 0; i < count; i++) {
    if (!state.annotations.hasMasks(i)) continue;
    masked++;
    context.fillStyle = state.propagated && !state.propagated.has(i) ? "#27506f" : "#4fa3ff";
    column(i, 8, 1);
  }
  context.fillStyle = "#8a949e";
  for (const key of state.points.keys()) column(Number(key.split(":")[0]), 5, 2);
  const selected = anchors(state.selected);
  context.fillStyle = hexOf(objectColour(state.selected));
  for (const frameIndex of selected) column(frameIndex, 0, 3);
  context.fillStyle = "#ffffff";
  context.fillRect((state.frameIndex + 0.5) * step - 1, 0, 2, canvas.height);
  canvas.dataset.anchors = selected.join(",");
  canvas.dataset.masked = masked;
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
