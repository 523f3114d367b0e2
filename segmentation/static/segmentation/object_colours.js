// Which colour each object is drawn in: assigned when the object is new to the page, looked at
// once more against the frame under its first mask, then kept (overlay.js picks the colours).

import { ui } from "./elements.js";
import { assignColour, colourOf, meanUnder, pickColour } from "./overlay.js";
import { state } from "./state.js";

export function objectColour(objectId) {
  return state.colours.get(objectId)?.colour ?? colourOf(objectId);
}

function othersColours(objectId) {
  return [...state.colours].filter(([id]) => id !== objectId).map(([, { colour }]) => colour);
}

// Objects new to the page take their colours in ID order, apart from the others'
// (overlay.js's assignColour); those gone give theirs back.
export function assignColours() {
  for (const objectId of state.colours.keys()) {
    if (!state.objects.includes(objectId)) state.colours.delete(objectId);
  }
  for (const objectId of [...state.objects].sort((a, b) => a - b)) {
    if (state.colours.has(objectId)) continue;
    state.colours.set(objectId, { colour: assignColour(objectId, othersColours(objectId)), under: null });
  }
}

// Each object's colour is looked at once more, on its first mask shown, against the frame's
// pixels under it, and then kept: a colour that changed from frame to frame would not name the
// object.
export function decideColours(masks) {
  if (state.frameOnCanvas !== state.frameIndex) return false; // the canvas holds another frame
  const { width, height } = state.video;
  let frame = null;
  let decided = false;
  for (const [objectId, mask] of masks) {
    const held = state.colours.get(objectId);
    if (!held || held.under) continue;
    frame ??= ui.frame.getContext("2d").getImageData(0, 0, width, height).data;
    const under = meanUnder(frame, mask);
    if (!under) continue;
    state.colours.set(objectId, { colour: pickColour(held.colour, under, othersColours(objectId)), under });
    decided = true;
  }
  return decided;
}
