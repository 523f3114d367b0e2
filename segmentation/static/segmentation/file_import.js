// An annotation file the person picks: checked against the video, uploaded for the server to
// check, given to the session, and shown in place of the page's work.

import { updateButtons } from "./controls.js";
import { drawOverlay } from "./frame_view.js";
import { upload } from "./graphql.js";
import { complain, plural, say } from "./messages.js";
import { renderObjects } from "./object_list.js";
import { promptsOf } from "./prompts.js";
import { resetProgress } from "./propagation.js";
import { Q } from "./queries.js";
import { run } from "./queue.js";
import { withSession } from "./session.js";
import { importInto } from "./session_import.js";
import { state } from "./state.js";
import { keepExport, remember } from "./tab_storage.js";
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
      await upload(Q.uploadAnnotations, {}, "file", file, () => {}); // the server checks it
    } catch (error) {
      throw new Error(`${file.name} was not imported: ${error.message}`);
    }
    // The server makes the file's clicks and masks the session's prompts, in place of its own.
    // The page shows the file's masks as they were exported; the session's answer may differ
    // by a few pixels where its engine redid them from the clicks (after a propagation).
    await withSession((sessionId) => importInto(sessionId, data));
    state.epoch++;
    state.annotations.load(data);
    ({ points: state.points, given: state.given } = promptsOf(data));
    keepExport(data);
    resetProgress();
    const ids = state.annotations.objectIds();
    state.objects = ids.length ? ids : [1];
    state.nextObjectId = Math.max(...state.objects) + 1;
    state.selected = state.objects[0];
    renderObjects();
    drawOverlay();
    drawTimeline();
    remember();
    updateButtons();
    say(`Imported the masks and clicks of ${plural(data.frames.length, "frame")} from ${file.name}.`);
  });
}
