// The session on the server: started, named in the page's address, taken up again after a
// reload, kept alive while the page is open, closed when the person leaves by the site's header.
// The session keeps its work in the server's store as it is made (docs/segmentation-api.md), so
// the page reads it from there whenever it opens or takes up a session: a reload takes the
// session in its address up again with its work, and a session that has gone (expired, or the
// server restarted) is replaced by a new one on the video, which starts with the same work.

import { ui } from "./elements.js";
import { showFrame } from "./frame_view.js";
import { ApiError, graphql } from "./graphql.js";
import { say } from "./messages.js";
import { renderObjects } from "./object_list.js";
import { Q } from "./queries.js";
import { run } from "./queue.js";
import { state } from "./state.js";
import { loadWork } from "./stored_work.js";
import { keepPlace } from "./tab_storage.js";

const PING_EVERY_MS = 60_000;

// Call fn(sessionId); if the session has gone (expired, or the server restarted), open a new
// one, which has the work from the store, and call again.
export async function withSession(fn) {
  try {
    return await fn(state.sessionId);
  } catch (error) {
    if (!(error instanceof ApiError) || error.code !== "SESSION_NOT_FOUND") throw error;
    await reopen();
    return fn(state.sessionId);
  }
}

// A new session on the video, with the work the server keeps for this browser on it.
export async function startSession() {
  const data = await graphql(Q.start, { input: { path: state.video.path } });
  const sessionId = data.startSession.sessionId;
  if (!(await loadWork(sessionId))) throw new ApiError("the new session ended at once", "SESSION_NOT_FOUND");
  adoptSession(sessionId);
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
  if (!response.ok) return;
  const answer = await response.json();
  ui.engine.textContent = `Engine: ${answer.engine}`;
  state.keepsWork = answer.keeps_work === true;
}

// A reload: the session named in the address, with its work from the store; false if the
// server no longer has it.
export async function resume(sessionId) {
  if (!(await loadWork(sessionId))) return false;
  adoptSession(sessionId);
  return true;
}

// The session has gone: a new one, which starts with the work the store kept.
export async function reopen() {
  await startSession();
  renderObjects();
  showFrame(state.frameIndex);
  say("The session had ended on the server; a new one is open, with your work.");
}

export function keepAlive() {
  setInterval(async () => {
    if (!state.sessionId) return;
    try {
      const data = await graphql(Q.ping, { input: { sessionId: state.sessionId } });
      if (!data.ping.success) run(reopen);
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
