// The annotator: one video, its frames from the server, clicks that give masks at once, then
// propagation through the video, playback with the masks, and export. It talks to the server
// only through the GraphQL API, the propagation jobs, the stored work and the frame and export
// files.
//
// This module is the page's entry: it opens the video and its session (a new one, or the one
// the page's address names) and wires the page's controls to the modules that each hold a part
// of the work (docs/architecture.md names them).

import { Annotations } from "./annotations.js";
import { click, pressEnd, pressMove, pressStart } from "./clicks.js";
import { updateButtons } from "./controls.js";
import { ui } from "./elements.js";
import { exportConverted, exportJson, exportZip, videoName } from "./exports.js";
import { importFile } from "./file_import.js";
import { FrameImages } from "./frame_images.js";
import { drawOverlay, showFrame } from "./frame_view.js";
import { graphql } from "./graphql.js";
import { onKey } from "./keys.js";
import { complain, say } from "./messages.js";
import { onObjectButtons, renderObjects } from "./object_list.js";
import { addObject, removeObject, selectObject } from "./objects.js";
import { goTo, play, PREFETCH_FRAMES, stopPlaying } from "./playback.js";
import { clearAll, clearFrame } from "./prompt_edits.js";
import { cancelPropagation, followRunningJob, startPropagation } from "./propagation.js";
import { markEnd } from "./propagation_end.js";
import { Q } from "./queries.js";
import { keepAlive, resume, startSession } from "./session.js";
import { state } from "./state.js";
import { keepPlace, recallColours, recallPlace } from "./tab_storage.js";
import { drawTimeline, timelineFrame } from "./timeline.js";

function wire() {
  ui.overlay.addEventListener("pointerdown", pressStart);
  ui.overlay.addEventListener("pointermove", pressMove);
  ui.overlay.addEventListener("pointerup", pressEnd);
  ui.overlay.addEventListener("pointercancel", () => {
    state.drag = null;
    drawOverlay();
  });
  ui.overlay.addEventListener("click", (event) => click(event, state.tapLabel));
  ui.overlay.addEventListener("contextmenu", (event) => click(event, 0));
  ui.scrubber.addEventListener("input", () => {
    stopPlaying();
    showFrame(Number(ui.scrubber.value));
  });
  ui.play.addEventListener("click", play);
  ui.timeline.addEventListener("click", (event) => goTo(timelineFrame(event)));
  ui.goto.max = state.video.frameCount;
  ui.goto.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && ui.goto.value !== "") goTo(Number(ui.goto.value) - 1);
    else if (event.key !== "Escape") return;
    ui.goto.value = "";
    ui.goto.blur();
    event.preventDefault();
  });
  ui.addObject.addEventListener("click", addObject);
  ui.mode.addEventListener("click", () => {
    state.tapLabel = 1 - state.tapLabel;
    ui.mode.setAttribute("aria-pressed", String(state.tapLabel === 0));
    ui.mode.textContent = state.tapLabel ? "Taps mark: object" : "Taps mark: background";
  });
  ui.clearFrame.addEventListener("click", clearFrame);
  ui.clearAll.addEventListener("click", clearAll);
  ui.propagate.addEventListener("click", startPropagation);
  ui.markEnd.addEventListener("click", markEnd);
  ui.direction.addEventListener("change", () => {
    // A select keeps the keys while it has focus: give them back to the page once chosen.
    ui.direction.blur();
    drawTimeline();
    keepPlace();
  });
  ui.cancel.addEventListener("click", cancelPropagation);
  ui.exportJson.addEventListener("click", exportJson);
  ui.exportZip.addEventListener("click", exportZip);
  ui.exportCoco.addEventListener("click", () => exportConverted("/annotations/coco.json", "coco.json", "COCO"));
  ui.exportYolo.addEventListener("click", () => exportConverted("/annotations/yolo.zip", "yolo.zip", "YOLO"));
  ui.importFile.addEventListener("change", () => {
    const [file] = ui.importFile.files;
    ui.importFile.value = "";
    if (file) importFile(file);
  });
  // Before the focused control sees them (capture), so that the keys answer after a click on a
  // button or the scrubber, and Space does not press the focused button too.
  addEventListener("keydown", onKey, { capture: true });
  addEventListener("resize", drawTimeline);
  // A job another page of the browser's started on the video meanwhile, seen when this one
  // comes back into view.
  document.addEventListener("visibilitychange", () => {
    if (document.visibilityState === "visible") followRunningJob();
  });
}

async function open() {
  const videoId = new URLSearchParams(location.search).get("video");
  try {
    state.video = videoId
      ? (await graphql(Q.video, { id: videoId })).node
      : (await graphql(Q.defaultVideo)).defaultVideo;
    if (!state.video) throw new Error("The server has no such video.");
  } catch (error) {
    ui.name.textContent = "No video";
    complain(`${error.message} Pick one in the gallery.`);
    return;
  }
  const { path, width, height, frameCount } = state.video;
  document.title = `${videoName()} · Annotate`;
  ui.name.textContent = videoName();
  for (const canvas of [ui.frame, ui.overlay]) Object.assign(canvas, { width, height });
  ui.scrubber.max = frameCount - 1;
  state.frames = new FrameImages(path);
  state.annotations = new Annotations();
  wire();
  const resumed = new URLSearchParams(location.search).get("session");
  // A reload comes back to the frame, the end and the direction it left.
  const place = recallPlace(resumed);
  state.endFrame = place.end;
  state.colours = recallColours();
  ui.direction.value = place.direction;
  // The session in the address, taken up again with its work; else a new one, which starts with
  // the work the server keeps for this browser on the video.
  let ended = false;
  try {
    if (!resumed || !(await resume(resumed))) {
      ended = Boolean(resumed);
      await startSession();
    }
  } catch (error) {
    complain(`The video cannot be opened: ${error.message}`);
    return;
  }
  renderObjects();
  keepAlive();
  if (ended) say("This page's session had ended on the server; a new one is open, with your work.");
  ui.play.disabled = ui.scrubber.disabled = ui.goto.disabled = false;
  // A job of the browser's running on the video (this page's before a reload, another page's):
  // followed here, the controls kept for it until it ends.
  await followRunningJob();
  updateButtons();
  drawTimeline();
  await showFrame(place.frame);
  state.frames.prefetch(place.frame + 1, PREFETCH_FRAMES, frameCount);
  ui.editor.dataset.ready = "true";
}

// What the page holds, for tests that check it stays bounded however long the video.
window.annotatorHeld = () => ({ ...state.annotations.held(), frameFiles: state.frames.files.size });

onObjectButtons({ select: selectObject, remove: removeObject });
open();
