// What the tab keeps in its sessionStorage, so that a reload, or the tab reopened, takes the
// session its address names up again: the page's own part of the work (its objects and clicks;
// the server holds the masks) with the server's receipt for it, where the person was, and the
// annotation file last exported or imported on the video.

import { ui } from "./elements.js";
import { state } from "./state.js";

function workKey(sessionId) {
  return `annotate:${sessionId}`;
}

// What only the page knows of the work: which objects there are and where they were clicked.
export function remember() {
  if (!state.sessionId) return;
  const work = {
    objects: state.objects,
    nextObjectId: state.nextObjectId,
    selected: state.selected,
    points: [...state.points],
    given: [...state.given],
    colours: [...state.colours],
    receipt: state.receipt,
  };
  try {
    sessionStorage.setItem(workKey(state.sessionId), JSON.stringify(work));
  } catch {
    // Storage full or refused: a reload then gets the masks back but not the clicks.
  }
}

// Where the person was: the frame shown, the propagation's end and its direction, kept apart
// from the work (it changes with every frame shown) so that a reload comes back there.
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

export function recall(sessionId) {
  try {
    return JSON.parse(sessionStorage.getItem(workKey(sessionId)));
  } catch {
    return null;
  }
}

export function adoptWork(work) {
  const objects = work?.objects?.length ? work.objects : state.annotations.objectIds();
  state.objects = objects.length ? objects : [1];
  state.nextObjectId = work?.nextObjectId ?? Math.max(...state.objects) + 1;
  state.selected = state.objects.includes(work?.selected) ? work.selected : state.objects[0];
  state.points = new Map(work?.points ?? []);
  state.given = new Set(work?.given ?? []);
  state.colours = new Map(work?.colours ?? []);
  state.receipt = typeof work?.receipt === "string" ? work.receipt : null;
}

// The server's receipt for the session, kept with the work: should the server lose the session,
// the work replayed into a new one with it does not spend that one's engine time again (up to
// what the server had shown; docs/segmentation-api.md). Taken whenever the queue empties.
export async function keepReceipt() {
  const sessionId = state.sessionId;
  if (!sessionId) return;
  try {
    const response = await fetch(`/sessions/${encodeURIComponent(sessionId)}/receipt`);
    if (!response.ok || sessionId !== state.sessionId) return;
    state.receipt = (await response.json()).receipt;
    remember();
  } catch {
    // The next one.
  }
}

// The annotation file this tab last exported or imported on the video, kept so that a session
// the server lost can start again from it (the tab's clicks alone hold no imported masks, and
// none of the masks a propagation made).
function exportKey() {
  return `annotate:last-export:${state.video.path}`;
}

export function keepExport(data) {
  try {
    sessionStorage.setItem(exportKey(), JSON.stringify(data));
  } catch {
    // Storage full or refused: Start again then has the tab's clicks only.
  }
}

export function lastExport() {
  try {
    const data = JSON.parse(sessionStorage.getItem(exportKey()));
    return data?.frames?.length ? data : null;
  } catch {
    return null;
  }
}
