// The session on the server: started, named in the page's address, taken up again after a
// reload, kept alive while the page is open, closed when the person leaves by the site's header.
// An operation that finds its session gone (expired, or the server restarted) reopens it and
// gives it the page's points again (`withSession`).

import { ui } from "./elements.js";
import { ApiError, graphql } from "./graphql.js";
import { say } from "./messages.js";
import { replayWork } from "./prompts.js";
import { Q } from "./queries.js";
import { run } from "./queue.js";
import { importInto } from "./session_import.js";
import { state } from "./state.js";
import { adoptWork, keepPlace, keepReceipt, recall, remember } from "./tab_storage.js";

const PING_EVERY_MS = 60_000;

// Call fn(sessionId); if the session has gone (expired, or the server restarted), open a new
// one with the page's points and call again.
export async function withSession(fn) {
  try {
    return await fn(state.sessionId);
  } catch (error) {
    if (!(error instanceof ApiError) || error.code !== "SESSION_NOT_FOUND") throw error;
    await reopen();
    return fn(state.sessionId);
  }
}

export async function startSession() {
  const data = await graphql(Q.start, { input: { path: state.video.path } });
  adoptSession(data.startSession.sessionId);
  state.receipt = null;
  remember();
  keepPlace();
}

function adoptSession(sessionId) {
  state.sessionId = sessionId;
  ui.editor.dataset.sessionId = sessionId;
  const address = new URL(location.href);
  address.searchParams.set("video", state.video.id);
  address.searchParams.set("session", sessionId);
  history.replaceState(null, "", address);
  showEngine(sessionId);
}

// With inference workers each session has its own (the page was drawn naming none).
async function showEngine(sessionId) {
  const response = await fetch(`/sessions/${encodeURIComponent(sessionId)}/engine`);
  if (response.ok) ui.engine.textContent = `Engine: ${(await response.json()).engine}`;
}

// A reload: the session named in the address, with its masks from the server and the clicks
// this tab kept; false if the server no longer has it (or it is another video's).
export async function resume(sessionId) {
  const response = await fetch(`/annotations/${encodeURIComponent(sessionId)}.json`);
  if (!response.ok) return false;
  const data = await response.json();
  if (data.video !== state.video.path) return false;
  state.annotations.load(data);
  adoptWork(recall(sessionId));
  adoptSession(sessionId);
  return true;
}

// The session has gone: a new one, given the page's work back (its clicks, and the masks it
// imported without clicks), as a replay of the lost session's with its receipt.
async function reopen() {
  const receipt = state.receipt;
  await startSession();
  const work = replayWork();
  if (work.frames.length) await importInto(state.sessionId, work, { replay: receipt });
  const given = work.frames.some((frame) => frame.objects.some((item) => !item.points));
  const what = given ? "your points and imported masks" : "your points";
  say(`The session had ended on the server; it was opened again with ${what}.`);
}

export function keepAlive() {
  setInterval(async () => {
    if (!state.sessionId) return;
    try {
      const data = await graphql(Q.ping, { input: { sessionId: state.sessionId } });
      if (!data.ping.success) run(reopen);
      else if (!state.pending) keepReceipt();
    } catch {
      // The next ping, or the next operation, tries again.
    }
  }, PING_EVERY_MS);
  // Leaving by the site's header closes the session at once. A reload, a closed tab or an
  // address typed keep it for the server's idle timeout, so that the page (or the tab reopened)
  // takes it up again.
  document.addEventListener("click", (event) => {
    const link = event.target.closest(".site-header a[href]");
    const plain = event.button === 0 && !(event.ctrlKey || event.metaKey || event.shiftKey || event.altKey);
    if (link && plain) state.leaving = true;
  });
  addEventListener("pageshow", () => {
    state.leaving = false;
  });
  addEventListener("pagehide", () => {
    if (state.leaving && state.sessionId) {
      graphql(Q.close, { input: { sessionId: state.sessionId } }, { keepalive: true });
    }
  });
}
