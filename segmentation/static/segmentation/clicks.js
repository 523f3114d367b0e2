// A press on the frame: a click gives the selected object a point (or takes one away), a drag
// draws its box.

import { ui } from "./elements.js";
import { drawOverlay, pointRadius } from "./frame_view.js";
import { complain } from "./messages.js";
import { stopPlaying } from "./playback.js";
import { promptsChanged } from "./prompt_edits.js";
import { pointKey } from "./prompts.js";
import { state } from "./state.js";

// A press that moves farther than this (screen pixels) before its release draws a box; less is a
// click, so that a hand that trembles still clicks.
const DRAG_PX = 5;

function videoPoint(event) {
  const box = ui.overlay.getBoundingClientRect();
  return {
    x: ((event.clientX - box.left) * state.video.width) / box.width,
    y: ((event.clientY - box.top) * state.video.height) / box.height,
  };
}

export function click(event, label) {
  event.preventDefault();
  if (state.dragged) {
    // The browser's click after a drag: the drag made a box, not a point.
    state.dragged = false;
    return;
  }
  if (!state.sessionId) {
    complain("This page has no session on the server: the click is not kept. Start again first.");
    return;
  }
  if (state.propagation) return;
  stopPlaying();
  const frameIndex = state.frameIndex;
  const objectId = state.selected;
  const key = pointKey(frameIndex, objectId);
  const point = videoPoint(event);
  const points = [...(state.points.get(key) ?? [])];
  // A box's corners are not points to remove: a click there is a click.
  const hit = points.findIndex((p) => p.label < 2 && Math.hypot(p.x - point.x, p.y - point.y) <= pointRadius());
  if (hit >= 0) points.splice(hit, 1);
  else points.push({ ...point, label });
  if (points.length) state.points.set(key, points);
  else state.points.delete(key);
  promptsChanged(frameIndex, objectId);
}

// The press on the frame: it becomes a box once it has moved DRAG_PX, else it stays a click.
export function pressStart(event) {
  state.dragged = false;
  if (event.button !== 0 || !event.isPrimary || !state.sessionId || state.propagation) return;
  ui.overlay.setPointerCapture(event.pointerId);
  const point = videoPoint(event);
  state.drag = { start: point, end: point, screen: [event.clientX, event.clientY], boxing: false };
}

export function pressMove(event) {
  const drag = state.drag;
  if (!drag) return;
  drag.end = videoPoint(event);
  drag.boxing ||= Math.hypot(event.clientX - drag.screen[0], event.clientY - drag.screen[1]) > DRAG_PX;
  if (drag.boxing) drawOverlay();
}

export function pressEnd(event) {
  const drag = state.drag;
  state.drag = null;
  if (!drag?.boxing) return;
  state.dragged = true;
  drag.end = videoPoint(event);
  if (!setBox(drag.start, drag.end)) drawOverlay(); // none: the live rectangle goes
}

// The selected object's box on the frame shown, from two opposite corners: clamped to the frame,
// it goes first in the key's points, in place of any box before it (the clicks stay). A box with
// no width or height left is no box; false then.
function setBox(a, b) {
  const { width, height } = state.video;
  const within = (value, max) => Math.min(Math.max(value, 0), max);
  const [left, right] = [within(Math.min(a.x, b.x), width), within(Math.max(a.x, b.x), width)];
  const [top, bottom] = [within(Math.min(a.y, b.y), height), within(Math.max(a.y, b.y), height)];
  if (right <= left || bottom <= top) return false;
  stopPlaying();
  const frameIndex = state.frameIndex;
  const objectId = state.selected;
  const key = pointKey(frameIndex, objectId);
  const clicks = (state.points.get(key) ?? []).filter((p) => p.label < 2);
  state.points.set(key, [{ x: left, y: top, label: 2 }, { x: right, y: bottom, label: 3 }, ...clicks]);
  promptsChanged(frameIndex, objectId);
  return true;
}
