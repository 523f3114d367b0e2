// Operations that change the session run one after another (`run`), in the order the person
// made them. One the server refuses for a while (the session's engine time, the client's limit)
// waits as long as the server says, counting down with the changes waiting behind it, and is
// sent again.

import { ui } from "./elements.js";
import { ApiError } from "./graphql.js";
import { complain, say } from "./messages.js";
import { state } from "./state.js";

// Refusals that say when to come back, and how often one operation is sent again after them.
const WAIT_REASONS = {
  RESOURCE_EXHAUSTED: "This session has used its share of the engine for now",
  RATE_LIMITED: "This page has sent more work than the server takes at once",
  SERVER_BUSY: "The server is busy",
};
const MAX_WAITS = 30;

// Queue an operation; refusals that say when to come back are waited out and sent again, unless
// the task does that itself (`retry` false).
export function run(task, { retry = true } = {}) {
  state.pending++;
  const next = state.queue
    .then(() => (retry ? withWaits(task) : task()))
    .catch((error) => complain(error.message))
    .finally(() => {
      state.pending--;
    });
  state.queue = next;
  return next;
}

export function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

// What waits behind the operation under way, for the messages of a wait.
export function waitingNote() {
  const waiting = state.pending - 1;
  if (waiting <= 0) return "";
  return waiting === 1 ? " 1 more change waits to be sent." : ` ${waiting} more changes wait to be sent.`;
}

// task(), sent again after each refusal that says when to, once the wait has been counted down.
export async function withWaits(task) {
  let said = null; // the last wait's message
  for (let waits = 0; ; waits++) {
    try {
      const result = await task();
      if (said !== null && ui.message.textContent === said) say("");
      return result;
    } catch (error) {
      const reason = error instanceof ApiError ? WAIT_REASONS[error.code] : undefined;
      if (!reason || !(error.retryAfter > 0) || waits >= MAX_WAITS) throw error;
      for (let left = Math.ceil(error.retryAfter); left > 0; left--) {
        ui.editor.dataset.waiting = left;
        say(`${reason}; sending again in ${left} s.${waitingNote()}`);
        await sleep(1000);
      }
      delete ui.editor.dataset.waiting;
      said = `${reason}; sending again…${waitingNote()}`;
      say(said);
    }
  }
}
