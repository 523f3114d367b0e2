// What the tab keeps in its sessionStorage, so that a reload, or the tab reopened, comes back
// where the person was: the frame shown, the propagation's end and its direction, and the
// colours its objects were drawn in. The work itself (objects, clicks, masks) the server keeps
// for the session (stored_work.js).

import { ui } from "./elements.js";
import { state } from "./state.js";

function placeKey(sessionId) {
  return `annotate:${sessionId}:place`;
}

export function keepPlace() {
  if (!state.sessionId) return;
  const place = { frame: state.frameIndex, end: state.endFrame, direction: ui.direction.value };
  try {
    sessionStorage.setItem(placeKey(state.sessionId), JSON.stringify(place));
  } catch {
    // Storage full or refused: a reload then starts on the first frame.
  }
}

// The place kept for the session, within this video; the first frame, both ways, no end if none
// (or no session).
export function recallPlace(sessionId) {
  let place = null;
  try {
    if (sessionId) place = JSON.parse(sessionStorage.getItem(placeKey(sessionId)));
  } catch {
    // As if none was kept.
  }
  const last = state.video.frameCount - 1;
  const inVideo = (value) => Number.isInteger(value) && value >= 0 && value <= last;
  const directions = [...ui.direction.options].map((option) => option.value);
  return {
    frame: inVideo(place?.frame) ? place.frame : 0,
    end: inVideo(place?.end) ? place.end : null,
    direction: directions.includes(place?.direction) ? place.direction : "both",
  };
}

// Each object's colour, as decided against the frame under its first mask (object_colours.js),
// kept per video so that the objects look the same after a reload.
function coloursKey() {
  return `annotate:colours:${state.video.path}`;
}

export function keepColours() {
  try {
    sessionStorage.setItem(coloursKey(), JSON.stringify([...state.colours]));
  } catch {
    // Storage full or refused: a reload decides the colours again.
  }
}

export function recallColours() {
  try {
    return new Map(JSON.parse(sessionStorage.getItem(coloursKey())) ?? []);
  } catch {
    return new Map();
  }
}
