// The page's keys: frames, clicked frames, the end mark, propagate, play.

import { ui } from "./elements.js";
import { goTo, play, stepToAnchor } from "./playback.js";
import { startPropagation } from "./propagation.js";
import { markEnd } from "./propagation_end.js";
import { state } from "./state.js";

// Where typing must stay typing: the go-to box handles its own Enter and Escape.
const TEXT_FIELDS = [
  "textarea",
  "select",
  "input:not([type=range], [type=button], [type=submit], [type=reset], [type=checkbox], [type=radio], [type=file], [type=color])",
].join(", ");

function inTextField(target) {
  return target instanceof Element && (target.isContentEditable || target.closest(TEXT_FIELDS) !== null);
}

export function onKey(event) {
  if (event.ctrlKey || event.metaKey || event.altKey || inTextField(event.target)) return;
  const last = state.video.frameCount - 1;
  if (event.key === "ArrowLeft") goTo(state.frameIndex - 1);
  else if (event.key === "ArrowRight") goTo(state.frameIndex + 1);
  else if (event.key === "[") stepToAnchor(-1);
  else if (event.key === "]") stepToAnchor(1);
  else if (event.key === "Home") goTo(0);
  else if (event.key === "End") goTo(last);
  else if (event.key === "g" || event.key === "G") ui.goto.focus();
  else if (event.key === "e" || event.key === "E") markEnd();
  else if (event.key === "p" || event.key === "P") {
    if (!ui.propagate.disabled) startPropagation();
  } else if (event.key === " ") play();
  else return;
  // The key is the page's: the focused scrubber does not step as well, a focused button is not
  // pressed, and the G does not land in the go-to box.
  event.preventDefault();
}
