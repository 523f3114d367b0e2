// The list of objects beside the frame: each one's colour and clicked frames, a button that
// selects it and one that removes it.

import { updateButtons } from "./controls.js";
import { ui } from "./elements.js";
import { assignColours, objectColour } from "./object_colours.js";
import { hexOf } from "./overlay.js";
import { state } from "./state.js";
import { keepColours } from "./tab_storage.js";

// What the buttons do, given by the page's entry: the operations on objects draw this list
// again, so the list does not import them.
const actions = { select: () => {}, remove: () => {} };

export function onObjectButtons({ select, remove }) {
  Object.assign(actions, { select, remove });
}

export function renderObjects() {
  assignColours();
  ui.objects.replaceChildren(
    ...state.objects.map((objectId) => {
      const item = document.createElement("li");
      item.className = objectId === state.selected ? "selected" : "";
      item.dataset.objectId = objectId;
      item.dataset.colour = hexOf(objectColour(objectId));
      const under = state.colours.get(objectId)?.under;
      if (under) item.dataset.under = hexOf(under);
      const pick = document.createElement("button");
      pick.type = "button";
      pick.className = "object-pick";
      pick.setAttribute("aria-pressed", String(objectId === state.selected));
      const swatch = document.createElement("span");
      swatch.className = "swatch";
      swatch.style.background = hexOf(objectColour(objectId));
      const clicks = [...state.points.keys()].filter((key) => key.endsWith(`:${objectId}`)).length;
      pick.append(swatch, `Object ${objectId}`);
      const details = document.createElement("span");
      details.className = "muted";
      details.textContent = clicks ? ` · clicked on ${clicks} frame${clicks > 1 ? "s" : ""}` : "";
      pick.append(details);
      pick.addEventListener("click", () => actions.select(objectId));
      const remove = document.createElement("button");
      remove.type = "button";
      remove.className = "object-remove";
      remove.textContent = "×";
      remove.title = `Remove object ${objectId}`;
      remove.setAttribute("aria-label", remove.title);
      remove.addEventListener("click", () => actions.remove(objectId));
      item.append(pick, remove);
      return item;
    }),
  );
  updateButtons();
  keepColours();
}
