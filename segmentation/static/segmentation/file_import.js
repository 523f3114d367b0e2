// An annotation file the person picks: checked against the video, uploaded for the server to
// check, given to the session in place of its work, and the session's work then read back from
// the server's store (the file's clicks, and its masks as the session answered them).

import { updateButtons } from "./controls.js";
import { showFrame } from "./frame_view.js";
import { upload } from "./graphql.js";
import { complain, plural, say } from "./messages.js";
import { renderObjects } from "./object_list.js";
import { resetProgress } from "./propagation.js";
import { Q } from "./queries.js";
import { run, withWaits } from "./queue.js";
import { withSession } from "./session.js";
import { importInto } from "./session_import.js";
import { state } from "./state.js";
import { loadWork } from "./stored_work.js";
import { drawTimeline } from "./timeline.js";

export async function importFile(file) {
  let data;
  try {
    data = JSON.parse(await file.text());
  } catch {
    complain(`${file.name} is not a JSON annotation file.`);
    return;
  }
  if (data?.video !== state.video.path) {
    complain(`${file.name} holds annotations of ${JSON.stringify(data?.video ?? null)}, not of this video.`);
    return;
  }
  run(async () => {
    try {
      // the server checks it; a refusal that says when to come back (this client's limit, spent
      // by the work just before) is waited out and the file sent again
      await withWaits(() => upload(Q.uploadAnnotations, {}, "file", file, () => {}));
    } catch (error) {
      throw new Error(`${file.name} was not imported: ${error.message}`);
    }
    // The server makes the file's clicks and masks the session's prompts, in place of its own,
    // and keeps them with the masks its engine answered (a few pixels apart from the file's
    // where it redid them from the clicks, after a propagation).
    await withSession((sessionId) => importInto(sessionId, data));
    state.epoch++;
    state.selected = null;
    await loadWork(state.sessionId);
    resetProgress();
    renderObjects();
    drawTimeline();
    updateButtons();
    await showFrame(state.frameIndex);
    say(`Imported the masks and clicks of ${plural(data.frames.length, "frame")} from ${file.name}.`);
  });
}
