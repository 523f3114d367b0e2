// The page's message line: what it says, a complaint in red, and the counts it writes.

import { ui } from "./elements.js";

export function say(text) {
  ui.message.textContent = text;
  ui.message.classList.remove("error");
}

export function complain(text) {
  ui.message.textContent = text;
  ui.message.classList.add("error");
}

export function plural(count, noun) {
  return `${count} ${noun}${count === 1 ? "" : "s"}`;
}
