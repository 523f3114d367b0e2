// A session the page's address names and the server no longer has: the page says so and offers
// Start again, a new session given the tab's last export and its clicks.

import { updateButtons } from "./controls.js";
import { ui } from "./elements.js";
import { drawOverlay } from "./frame_view.js";
import { complain, plural, say } from "./messages.js";
import { renderObjects } from "./object_list.js";
import { promptsOf, replayWork } from "./prompts.js";
import { run, withWaits } from "./queue.js";
import { startSession } from "./session.js";
import { importInto } from "./session_import.js";
import { state } from "./state.js";
import { adoptWork, lastExport, recall } from "./tab_storage.js";
import { drawTimeline } from "./timeline.js";

// The session in the address has gone: say so, keep the clicks this tab holds, and offer a new
// session that gets them, after the tab's last export if it has one (the page does not reopen
// it by itself, so that a stale address does not silently start work the person did not ask
// for).
export function sessionEnded(sessionId) {
  adoptWork(recall(sessionId));
  const frames = new Set([...state.points.keys()].map((key) => key.split(":")[0])).size;
  const saved = lastExport();
  const what = [];
  if (saved) what.push(`your last export (${plural(saved.frames.length, "frame")})`);
  if (frames) what.push(`your clicks on ${plural(frames, "frame")}`);
  const again = what.length
    ? `Start again to open a new one on this video with ${what.join(" and ")}.`
    : "Start again to open a new one on this video.";
  complain(`This page's session has ended on the server (it was idle too long, or the server restarted). ${again}`);
  ui.startAgain.hidden = false;
}

export function startAgain() {
  ui.startAgain.hidden = true;
  run(
    async () => {
      const receipt = state.receipt; // the lost session's
      const clicks = state.points.size > 0; // the tab's; an export's go with it
      const saved = lastExport();
      try {
        await withWaits(startSession);
      } catch (error) {
        ui.startAgain.hidden = false;
        throw error;
      }
      if (saved) adoptExport(saved);
      try {
        const work = replayWork();
        if (work.frames.length) await importInto(state.sessionId, work, { replay: receipt });
      } finally {
        renderObjects();
        drawOverlay();
        updateButtons();
        drawTimeline();
      }
      const what = [];
      if (saved) what.push(`your last export (${plural(saved.frames.length, "frame")})`);
      if (clicks) what.push("your clicks");
      say(what.length ? `A new session is open, with ${what.join(" and ")}.` : "A new session is open.");
    },
    { retry: false },
  );
}

// Start again from the last export: its masks and prompts, with the tab's clicks over them (they
// are newer, and are sent after the export's).
function adoptExport(data) {
  state.annotations.load(data);
  const { points, given } = promptsOf(data);
  for (const [key, clicks] of state.points) points.set(key, clicks);
  state.points = points;
  state.given = new Set([...given].filter((key) => !points.has(key)));
  const objects = new Set([...state.objects, ...state.annotations.objectIds()]);
  state.objects = [...objects].sort((a, b) => a - b);
  state.nextObjectId = Math.max(state.nextObjectId, Math.max(...state.objects) + 1);
  if (!state.objects.includes(state.selected)) state.selected = state.objects[0];
}
