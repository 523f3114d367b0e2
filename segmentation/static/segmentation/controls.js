// Which controls may be used: none while the page has no session, or a propagation or an import
// is under way (a propagation job holds the session on the server); Cancel once the job runs.

import { ui } from "./elements.js";
import { state } from "./state.js";

export function updateButtons() {
  const busy = !state.sessionId || Boolean(state.propagation) || state.importing;
  // Imported masks are prompts too: propagation starts from them as from clicks.
  ui.propagate.disabled = busy || (state.points.size === 0 && state.given.size === 0);
  ui.propagate.hidden = Boolean(state.propagation);
  ui.cancel.hidden = !state.propagation;
  ui.cancel.disabled = !state.propagation?.job || state.propagation.cancelling;
  for (const control of [ui.addObject, ui.clearFrame, ui.clearAll, ui.exportJson, ui.exportZip, ui.importFile]) {
    control.disabled = busy;
  }
  for (const button of ui.objects.querySelectorAll("button")) button.disabled = busy;
  for (const control of [ui.exportCoco, ui.exportYolo]) control.disabled = busy;
}
