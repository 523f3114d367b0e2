// The propagation's end, a frame the person marks: the mark and the button that sets it.

import { ui } from "./elements.js";
import { state } from "./state.js";
import { keepPlace } from "./tab_storage.js";
import { drawTimeline } from "./timeline.js";

// Marks the frame shown as the propagation's end, moving the mark there from another frame;
// pressed on the marked frame itself, clears the mark.
export function markEnd() {
  state.endFrame = state.endFrame === state.frameIndex ? null : state.frameIndex;
  showEnd();
  drawTimeline();
  keepPlace();
}

// The end button says what pressing it does on the frame shown.
export function showEnd() {
  const end = state.endFrame;
  ui.markEnd.setAttribute("aria-pressed", String(end !== null));
  if (end === null) ui.markEnd.textContent = "Mark end here";
  else if (end === state.frameIndex) ui.markEnd.textContent = `Clear end (frame ${end + 1})`;
  else ui.markEnd.textContent = `Move end here (now frame ${end + 1})`;
}
