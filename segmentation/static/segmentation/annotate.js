// The annotator: one video, its frames from the server, clicks that give masks at once, then
// propagation through the video, playback with the masks, and export. It talks to the server
// only through the GraphQL API, the propagation stream and the frame and export files.
//
// Operations that change the session run one after another (`run`), in the order the person
// made them; a session that expired is reopened and given the page's points again. One the
// server refuses for a while (the session's engine time, the client's limit) waits as long as the
// server says, counting down with the changes waiting behind it, and is sent again.
//
// The session's ID is in the page's address and the page's own part of the work (its objects and
// clicks; the server holds the masks) in the tab's sessionStorage, so that a reload, or the tab
// reopened, takes the session up again.

import { Annotations } from "./annotations.js";
import { pageFrames } from "./frame_numbers.js";
import { FrameImages } from "./frames.js";
import { ApiError, graphql, refusal, upload } from "./graphql.js";
import { assignColour, colourOf, drawBox, drawPoints, hexOf, maskImage, meanUnder, pickColour } from "./overlay.js";
import { rleEmpty } from "./rle.js";
import { propagate } from "./stream.js";

const PING_EVERY_MS = 60_000;
const POINT_RADIUS_PX = 7; // on screen
// A press that moves farther than this (screen pixels) before its release draws a box; less is a
// click, so that a hand that trembles still clicks.
const DRAG_PX = 5;
const PREFETCH_FRAMES = 24;
// Refusals that say when to come back, and how often one operation is sent again after them.
const WAIT_REASONS = {
  RESOURCE_EXHAUSTED: "This session has used its share of the engine for now",
  RATE_LIMITED: "This page has sent more work than the server takes at once",
  SERVER_BUSY: "The server is busy",
};
const MAX_WAITS = 30;

const VIDEO = "id path width height frameCount fps";
const FRAME_MASKS = "frameIndex rleMaskList { objectId rleMask { size counts } }";
const Q = {
  video: `query Video($id: GlobalID!) { node(id: $id) { ... on Video { ${VIDEO} } } }`,
  defaultVideo: `query DefaultVideo { defaultVideo { ${VIDEO} } }`,
  start: `mutation Start($input: StartSessionInput!) { startSession(input: $input) { sessionId } }`,
  close: `mutation Close($input: CloseSessionInput!) { closeSession(input: $input) { success } }`,
  ping: `query Ping($input: PingInput!) { ping(input: $input) { success } }`,
  addPoints: `mutation Add($input: AddPointsInput!) { addPoints(input: $input) { ${FRAME_MASKS} } }`,
  clearFrame: `mutation ClearFrame($input: ClearPointsInFrameInput!) {
    clearPointsInFrame(input: $input) { ${FRAME_MASKS} } }`,
  clearVideo: `mutation ClearVideo($input: ClearPointsInVideoInput!) {
    clearPointsInVideo(input: $input) { success } }`,
  removeObject: `mutation Remove($input: RemoveObjectInput!) { removeObject(input: $input) { ${FRAME_MASKS} } }`,
  cancel: `mutation Cancel($input: CancelPropagateInVideoInput!) {
    cancelPropagateInVideo(input: $input) { success } }`,
  uploadAnnotations: `mutation Import($file: Upload!) { uploadAnnotations(file: $file) }`,
};

const $ = (id) => document.getElementById(id);
const ui = {
  engine: $("engine"),
  editor: $("editor"),
  name: $("video-name"),
  message: $("message"),
  frame: $("frame"),
  overlay: $("overlay"),
  play: $("play"),
  scrubber: $("scrubber"),
  frameLabel: $("frame-label"),
  goto: $("goto"),
  timeline: $("timeline"),
  objects: $("objects"),
  addObject: $("add-object"),
  mode: $("mode"),
  clearFrame: $("clear-frame"),
  clearAll: $("clear-all"),
  propagate: $("propagate"),
  markEnd: $("mark-end"),
  direction: $("direction"),
  cancel: $("cancel"),
  progress: $("progress"),
  progressLabel: $("progress-label"),
  exportJson: $("export-json"),
  exportZip: $("export-zip"),
  exportCoco: $("export-coco"),
  exportYolo: $("export-yolo"),
  importFile: $("import-file"),
  startAgain: $("start-again"),
};

const state = {
  video: null,
  sessionId: null,
  frames: null,
  annotations: null,
  frameIndex: 0,
  objects: [], // object IDs, in the order they were made
  nextObjectId: 1,
  selected: null,
  points: new Map(), // "frame:object" -> [{x, y, label}] in video pixels; a box first (2, 3)
  given: new Set(), // "frame:object" of imported masks without clicks: prompts on the server
  colours: new Map(), // object ID -> {colour, under}: its colour, and once its first mask is
  // shown the mean colour under it (its colour then changed if it was near)
  frameOnCanvas: null, // the frame index whose image the frame canvas holds
  tapLabel: 1,
  drag: null, // the press on the frame that may become a box: {start, end, screen, boxing}
  dragged: false, // the press just released drew a box: the click that follows it is not a click
  playing: null, // the running playback, if any
  propagation: null, // the AbortController of the running propagation
  propagated: null, // the frames the running propagation has sent, a Set
  endFrame: null, // the frame marked as the propagation's end, or null: the video's end
  queue: Promise.resolve(),
  epoch: 0, // counts "clear all"s
  drawn: 0, // the latest frame request; older ones that arrive late are not drawn
  leaving: false, // a link of the site's header was followed
  importing: false, // an annotation import is under way (it may wait out the server's limits)
  pending: 0, // operations queued or running
  receipt: null, // the server's latest receipt for the session: what it has shown it (signed)
};

// ---- messages

function say(text) {
  ui.message.textContent = text;
  ui.message.classList.remove("error");
}

function complain(text) {
  ui.message.textContent = text;
  ui.message.classList.add("error");
}

// ---- the session

// Queue an operation; refusals that say when to come back are waited out and sent again, unless
// the task does that itself (`retry` false).
function run(task, { retry = true } = {}) {
  state.pending++;
  const next = state.queue
    .then(() => (retry ? withWaits(task) : task()))
    .catch((error) => complain(error.message))
    .finally(() => {
      if (--state.pending === 0) keepReceipt();
    });
  state.queue = next;
  return next;
}

function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

// What waits behind the operation under way, for the messages of a wait.
function waitingNote() {
  const waiting = state.pending - 1;
  if (waiting <= 0) return "";
  return waiting === 1 ? " 1 more change waits to be sent." : ` ${waiting} more changes wait to be sent.`;
}

// task(), sent again after each refusal that says when to, once the wait has been counted down.
async function withWaits(task) {
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

// Call fn(sessionId); if the session has gone (expired, or the server restarted), open a new
// one with the page's points and call again.
async function withSession(fn) {
  try {
    return await fn(state.sessionId);
  } catch (error) {
    if (!(error instanceof ApiError) || error.code !== "SESSION_NOT_FOUND") throw error;
    await reopen();
    return fn(state.sessionId);
  }
}

async function startSession() {
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

function workKey(sessionId) {
  return `annotate:${sessionId}`;
}

// What only the page knows of the work: which objects there are and where they were clicked.
function remember() {
  if (!state.sessionId) return;
  const work = {
    objects: state.objects,
    nextObjectId: state.nextObjectId,
    selected: state.selected,
    points: [...state.points],
    given: [...state.given],
    colours: [...state.colours],
    receipt: state.receipt,
  };
  try {
    sessionStorage.setItem(workKey(state.sessionId), JSON.stringify(work));
  } catch {
    // Storage full or refused: a reload then gets the masks back but not the clicks.
  }
}

// Where the person was: the frame shown, the propagation's end and its direction, kept apart
// from the work (it changes with every frame shown) so that a reload comes back there.
function placeKey(sessionId) {
  return `annotate:${sessionId}:place`;
}

function keepPlace() {
  if (!state.sessionId) return;
  const place = { frame: state.frameIndex, end: state.endFrame, direction: ui.direction.value };
  try {
    sessionStorage.setItem(placeKey(state.sessionId), JSON.stringify(place));
  } catch {
    // Storage full or refused: a reload then starts on the first frame.
  }
}

// The place kept for the session, within this video; the first frame, both ways, no end if none
// (or no session).
function recallPlace(sessionId) {
  let place = null;
  try {
    if (sessionId) place = JSON.parse(sessionStorage.getItem(placeKey(sessionId)));
  } catch {
    // As if none was kept.
  }
  const last = state.video.frameCount - 1;
  const inVideo = (value) => Number.isInteger(value) && value >= 0 && value <= last;
  const directions = [...ui.direction.options].map((option) => option.value);
  return {
    frame: inVideo(place?.frame) ? place.frame : 0,
    end: inVideo(place?.end) ? place.end : null,
    direction: directions.includes(place?.direction) ? place.direction : "both",
  };
}

function recall(sessionId) {
  try {
    return JSON.parse(sessionStorage.getItem(workKey(sessionId)));
  } catch {
    return null;
  }
}

function adoptWork(work) {
  const objects = work?.objects?.length ? work.objects : state.annotations.objectIds();
  state.objects = objects.length ? objects : [1];
  state.nextObjectId = work?.nextObjectId ?? Math.max(...state.objects) + 1;
  state.selected = state.objects.includes(work?.selected) ? work.selected : state.objects[0];
  state.points = new Map(work?.points ?? []);
  state.given = new Set(work?.given ?? []);
  state.colours = new Map(work?.colours ?? []);
  state.receipt = typeof work?.receipt === "string" ? work.receipt : null;
}

// The server's receipt for the session, kept with the work: should the server lose the session,
// the work replayed into a new one with it does not spend that one's engine time again (up to
// what the server had shown; docs/segmentation-api.md). Taken whenever the queue empties.
async function keepReceipt() {
  const sessionId = state.sessionId;
  if (!sessionId) return;
  try {
    const response = await fetch(`/sessions/${encodeURIComponent(sessionId)}/receipt`);
    if (!response.ok || sessionId !== state.sessionId) return;
    state.receipt = (await response.json()).receipt;
    remember();
  } catch {
    // The next one.
  }
}

// A reload: the session named in the address, with its masks from the server and the clicks
// this tab kept; false if the server no longer has it (or it is another video's).
async function resume(sessionId) {
  const response = await fetch(`/annotations/${encodeURIComponent(sessionId)}.json`);
  if (!response.ok) return false;
  const data = await response.json();
  if (data.video !== state.video.path) return false;
  state.annotations.load(data);
  adoptWork(recall(sessionId));
  adoptSession(sessionId);
  return true;
}

function plural(count, noun) {
  return `${count} ${noun}${count === 1 ? "" : "s"}`;
}

// The annotation file this tab last exported or imported on the video, kept so that a session
// the server lost can start again from it (the tab's clicks alone hold no imported masks, and
// none of the masks a propagation made).
function exportKey() {
  return `annotate:last-export:${state.video.path}`;
}

function keepExport(data) {
  try {
    sessionStorage.setItem(exportKey(), JSON.stringify(data));
  } catch {
    // Storage full or refused: Start again then has the tab's clicks only.
  }
}

function lastExport() {
  try {
    const data = JSON.parse(sessionStorage.getItem(exportKey()));
    return data?.frames?.length ? data : null;
  } catch {
    return null;
  }
}

// The session in the address has gone: say so, keep the clicks this tab holds, and offer a new
// session that gets them, after the tab's last export if it has one (the page does not reopen
// it by itself, so that a stale address does not silently start work the person did not ask
// for).
function sessionEnded(sessionId) {
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

function startAgain() {
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

// An annotation file's prompts as the page keeps them: the clicks per "frame:object" in video
// pixels, and the keys of masks without clicks.
function promptsOf(data) {
  const { width, height } = state.video;
  const points = new Map();
  const given = new Set();
  for (const frame of data.frames) {
    for (const item of frame.objects) {
      const key = pointKey(frame.frame_index, item.object_id);
      if (!item.points) given.add(key);
      else points.set(key, item.points.map(([x, y], i) => ({ x: x * width, y: y * height, label: item.labels[i] })));
    }
  }
  return { points, given };
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

// With inference workers each session has its own (the page was drawn naming none).
async function showEngine(sessionId) {
  const response = await fetch(`/sessions/${encodeURIComponent(sessionId)}/engine`);
  if (response.ok) ui.engine.textContent = `Engine: ${(await response.json()).engine}`;
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

// The page's work as an annotation file, for a new session to be given: each object's clicks on
// a frame (beside the mask the page shows there, or an empty one: the clicks are the prompt), and
// the imported masks without clicks (state.given), which only the lost session held as prompts.
function replayWork() {
  const { width, height } = state.video;
  const frames = new Map();
  const keys = [...state.points.keys(), ...[...state.given].filter((key) => !state.points.has(key))];
  for (const key of keys) {
    const [frameIndex, objectId] = key.split(":").map(Number);
    const mask = state.annotations.rle(frameIndex, objectId);
    const clicked = clicksOf(frameIndex, objectId);
    if (!clicked && !mask) continue;
    if (!frames.has(frameIndex)) frames.set(frameIndex, []);
    frames.get(frameIndex).push({ object_id: objectId, mask: mask ?? rleEmpty(height, width), ...(clicked ?? {}) });
  }
  return {
    video: state.video.path,
    frames: [...frames]
      .sort(([a], [b]) => a - b)
      .map(([frameIndex, objects]) => ({
        frame_index: frameIndex,
        objects: objects.sort((a, b) => a.object_id - b.object_id),
      })),
  };
}

function keepAlive() {
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

// ---- drawing

function pointKey(frameIndex, objectId) {
  return `${frameIndex}:${objectId}`;
}

// The frames where the object has points, in order: its anchors.
function anchors(objectId) {
  const frames = [];
  for (const key of state.points.keys()) {
    const [frameIndex, id] = key.split(":").map(Number);
    if (id === objectId) frames.push(frameIndex);
  }
  return frames.sort((a, b) => a - b);
}

function pointRadius() {
  return (POINT_RADIUS_PX * ui.overlay.width) / Math.max(ui.overlay.clientWidth, 1);
}

async function showFrame(frameIndex) {
  state.frameIndex = frameIndex;
  ui.scrubber.value = frameIndex;
  ui.frameLabel.textContent = `${frameIndex + 1} / ${state.video.frameCount}`;
  showEnd();
  drawTimeline();
  keepPlace();
  const request = ++state.drawn;
  let image;
  try {
    image = await state.frames.get(frameIndex);
  } catch (error) {
    complain(error.message);
    return;
  }
  if (request === state.drawn) {
    ui.frame.getContext("2d").drawImage(image, 0, 0);
    state.frameOnCanvas = frameIndex;
    drawOverlay();
    ui.editor.dataset.frameShown = frameIndex;
  }
  image.close();
}

function objectColour(objectId) {
  return state.colours.get(objectId)?.colour ?? colourOf(objectId);
}

function othersColours(objectId) {
  return [...state.colours].filter(([id]) => id !== objectId).map(([, { colour }]) => colour);
}

// Objects new to the page take their colours in ID order, apart from the others'
// (overlay.js's assignColour); those gone give theirs back.
function assignColours() {
  for (const objectId of state.colours.keys()) {
    if (!state.objects.includes(objectId)) state.colours.delete(objectId);
  }
  for (const objectId of [...state.objects].sort((a, b) => a - b)) {
    if (state.colours.has(objectId)) continue;
    state.colours.set(objectId, { colour: assignColour(objectId, othersColours(objectId)), under: null });
  }
}

// Each object's colour is looked at once more, on its first mask shown, against the frame's
// pixels under it, and then kept: a colour that changed from frame to frame would not name the
// object.
function decideColours(masks) {
  if (state.frameOnCanvas !== state.frameIndex) return false; // the canvas holds another frame
  const { width, height } = state.video;
  let frame = null;
  let decided = false;
  for (const [objectId, mask] of masks) {
    const held = state.colours.get(objectId);
    if (!held || held.under) continue;
    frame ??= ui.frame.getContext("2d").getImageData(0, 0, width, height).data;
    const under = meanUnder(frame, mask);
    if (!under) continue;
    state.colours.set(objectId, { colour: pickColour(held.colour, under, othersColours(objectId)), under });
    decided = true;
  }
  return decided;
}

function drawOverlay() {
  const { width, height } = state.video;
  const masks = state.annotations.masks(state.frameIndex);
  if (decideColours(masks)) {
    renderObjects();
    drawTimeline();
  }
  const context = ui.overlay.getContext("2d");
  context.putImageData(maskImage(masks, width, height, objectColour), 0, 0);
  for (const objectId of state.objects) {
    const points = state.points.get(pointKey(state.frameIndex, objectId)) ?? [];
    drawPoints(context, points, objectColour(objectId), pointRadius());
  }
  if (state.drag?.boxing) {
    drawBox(context, state.drag.start, state.drag.end, objectColour(state.selected), pointRadius() / 3, {
      dashed: true,
    });
  }
}

// The timeline, one column a frame: a low bar where there are masks (dimmed, while a propagation
// runs, where it has not reached yet), a short mark on every clicked frame, a tall one in its
// colour on the selected object's, and the frame shown.
function drawTimeline() {
  const canvas = ui.timeline;
  const count = state.video.frameCount;
  canvas.width = Math.max(canvas.clientWidth, 1);
  const context = canvas.getContext("2d");
  context.clearRect(0, 0, canvas.width, canvas.height);
  const step = canvas.width / count;
  const column = (frameIndex, top, minimum) =>
    context.fillRect(frameIndex * step, top, Math.max(step, minimum), canvas.height - top);
  let masked = 0;
  for (let i = 0; i < count; i++) {
    if (!state.annotations.hasMasks(i)) continue;
    masked++;
    context.fillStyle = state.propagated && !state.propagated.has(i) ? "#27506f" : "#4fa3ff";
    column(i, 8, 1);
  }
  context.fillStyle = "#8a949e";
  for (const key of state.points.keys()) column(Number(key.split(":")[0]), 5, 2);
  const selected = anchors(state.selected);
  context.fillStyle = hexOf(objectColour(state.selected));
  for (const frameIndex of selected) column(frameIndex, 0, 3);
  context.fillStyle = "#ffffff";
  context.fillRect((state.frameIndex + 0.5) * step - 1, 0, 2, canvas.height);
  canvas.dataset.anchors = selected.join(",");
  canvas.dataset.masked = masked;
  drawRange(context, step);
}

// The frames a propagation from the frame shown would reach, as the server counts them (see
// docs/segmentation-api.md): [first, last], inclusive.
function propagationRange() {
  const start = state.frameIndex;
  const last = state.video.frameCount - 1;
  const end = state.endFrame;
  const direction = ui.direction.value;
  if (direction === "forward") return [start, end ?? last];
  if (direction === "backward") return [end ?? 0, start];
  if (end === null) return [0, last];
  const reach = Math.abs(end - start); // both ways, as SAM 2's max_frame_num_to_track
  return [Math.max(start - reach, 0), Math.min(start + reach, last)];
}

// The range on the timeline: a thin band over the frames it reaches (shown once it is narrower
// than the whole video) and the marked end, a tall amber mark.
function drawRange(context, step) {
  const canvas = ui.timeline;
  const [first, last] = propagationRange();
  canvas.dataset.range = `${first}-${last}`;
  canvas.dataset.end = state.endFrame ?? "";
  context.fillStyle = "#ffb020";
  if (first > 0 || last < state.video.frameCount - 1) {
    context.fillRect(first * step, 0, (last - first + 1) * step, 2);
  }
  if (state.endFrame !== null) context.fillRect(state.endFrame * step, 0, Math.max(step, 3), canvas.height);
}

// Marks the frame shown as the propagation's end, moving the mark there from another frame;
// pressed on the marked frame itself, clears the mark.
function markEnd() {
  state.endFrame = state.endFrame === state.frameIndex ? null : state.frameIndex;
  showEnd();
  drawTimeline();
  keepPlace();
}

// The end button says what pressing it does on the frame shown.
function showEnd() {
  const end = state.endFrame;
  ui.markEnd.setAttribute("aria-pressed", String(end !== null));
  if (end === null) ui.markEnd.textContent = "Mark end here";
  else if (end === state.frameIndex) ui.markEnd.textContent = `Clear end (frame ${end + 1})`;
  else ui.markEnd.textContent = `Move end here (now frame ${end + 1})`;
}

// Masks from the server; those of objects removed meanwhile are dropped.
function applyMasks({ frameIndex, rleMaskList }) {
  state.annotations.setMasks(
    frameIndex,
    rleMaskList
      .filter((item) => state.objects.includes(item.objectId))
      .map((item) => ({ objectId: item.objectId, rle: item.rleMask })),
  );
  if (frameIndex === state.frameIndex) drawOverlay();
}

// ---- objects

function renderObjects() {
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
      pick.addEventListener("click", () => selectObject(objectId));
      const remove = document.createElement("button");
      remove.type = "button";
      remove.className = "object-remove";
      remove.textContent = "×";
      remove.title = `Remove object ${objectId}`;
      remove.setAttribute("aria-label", remove.title);
      remove.addEventListener("click", () => removeObject(objectId));
      item.append(pick, remove);
      return item;
    }),
  );
  updateButtons();
  remember();
}

function selectObject(objectId) {
  state.selected = objectId;
  renderObjects();
  drawTimeline();
}

function addObject() {
  const objectId = state.nextObjectId++;
  state.objects.push(objectId);
  selectObject(objectId);
}

function removeObject(objectId) {
  state.annotations.removeObject(objectId);
  for (const key of [...state.points.keys()]) if (key.endsWith(`:${objectId}`)) state.points.delete(key);
  for (const key of [...state.given]) if (key.endsWith(`:${objectId}`)) state.given.delete(key);
  state.objects = state.objects.filter((id) => id !== objectId);
  if (!state.objects.length) addObject();
  if (state.selected === objectId) state.selected = state.objects[0];
  renderObjects();
  drawOverlay();
  drawTimeline();
  run(async () => {
    const frames = await withSession((sessionId) =>
      graphql(Q.removeObject, { input: { sessionId, objectId } }),
    );
    frames.removeObject.forEach(applyMasks);
    drawTimeline();
  });
}

// ---- clicks

function videoPoint(event) {
  const box = ui.overlay.getBoundingClientRect();
  return {
    x: ((event.clientX - box.left) * state.video.width) / box.width,
    y: ((event.clientY - box.top) * state.video.height) / box.height,
  };
}

function click(event, label) {
  event.preventDefault();
  if (state.dragged) {
    // The browser's click after a drag: the drag made a box, not a point.
    state.dragged = false;
    return;
  }
  if (!state.sessionId) {
    complain("This page has no session on the server: the click is not kept. Start again first.");
    return;
  }
  if (state.propagation) return;
  stopPlaying();
  const frameIndex = state.frameIndex;
  const objectId = state.selected;
  const key = pointKey(frameIndex, objectId);
  const point = videoPoint(event);
  const points = [...(state.points.get(key) ?? [])];
  // A box's corners are not points to remove: a click there is a click.
  const hit = points.findIndex((p) => p.label < 2 && Math.hypot(p.x - point.x, p.y - point.y) <= pointRadius());
  if (hit >= 0) points.splice(hit, 1);
  else points.push({ ...point, label });
  if (points.length) state.points.set(key, points);
  else state.points.delete(key);
  promptsChanged(frameIndex, objectId);
}

// The press on the frame: it becomes a box once it has moved DRAG_PX, else it stays a click.
function pressStart(event) {
  state.dragged = false;
  if (event.button !== 0 || !event.isPrimary || !state.sessionId || state.propagation) return;
  ui.overlay.setPointerCapture(event.pointerId);
  const point = videoPoint(event);
  state.drag = { start: point, end: point, screen: [event.clientX, event.clientY], boxing: false };
}

function pressMove(event) {
  const drag = state.drag;
  if (!drag) return;
  drag.end = videoPoint(event);
  drag.boxing ||= Math.hypot(event.clientX - drag.screen[0], event.clientY - drag.screen[1]) > DRAG_PX;
  if (drag.boxing) drawOverlay();
}

function pressEnd(event) {
  const drag = state.drag;
  state.drag = null;
  if (!drag?.boxing) return;
  state.dragged = true;
  drag.end = videoPoint(event);
  if (!setBox(drag.start, drag.end)) drawOverlay(); // none: the live rectangle goes
}

// The selected object's box on the frame shown, from two opposite corners: clamped to the frame,
// it goes first in the key's points, in place of any box before it (the clicks stay). A box with
// no width or height left is no box; false then.
function setBox(a, b) {
  const { width, height } = state.video;
  const within = (value, max) => Math.min(Math.max(value, 0), max);
  const [left, right] = [within(Math.min(a.x, b.x), width), within(Math.max(a.x, b.x), width)];
  const [top, bottom] = [within(Math.min(a.y, b.y), height), within(Math.max(a.y, b.y), height)];
  if (right <= left || bottom <= top) return false;
  stopPlaying();
  const frameIndex = state.frameIndex;
  const objectId = state.selected;
  const key = pointKey(frameIndex, objectId);
  const clicks = (state.points.get(key) ?? []).filter((p) => p.label < 2);
  state.points.set(key, [{ x: left, y: top, label: 2 }, { x: right, y: bottom, label: 3 }, ...clicks]);
  promptsChanged(frameIndex, objectId);
  return true;
}

// The object's prompts on the frame changed in the page: show them, then send them.
function promptsChanged(frameIndex, objectId) {
  const key = pointKey(frameIndex, objectId);
  drawOverlay(); // the point shows at once; its mask follows
  renderObjects();
  drawTimeline();
  const epoch = state.epoch;
  run(async () => {
    // The points as they are when this turn comes: clicks made meanwhile are sent together.
    const latest = state.points.get(key) ?? [];
    const masks = await withSession((sessionId) => sendPoints(sessionId, frameIndex, objectId, latest));
    if (epoch !== state.epoch) return;
    applyMasks(masks);
    drawTimeline();
  });
}

async function sendPoints(sessionId, frameIndex, objectId, points) {
  if (!points.length) {
    const data = await graphql(Q.clearFrame, { input: { sessionId, frameIndex, objectId } });
    return data.clearPointsInFrame;
  }
  const { width, height } = state.video;
  const data = await graphql(Q.addPoints, {
    input: {
      sessionId,
      frameIndex,
      objectId,
      clearOldPoints: true,
      labels: points.map((p) => p.label),
      points: points.map((p) => [p.x / width, p.y / height]),
    },
  });
  return data.addPoints;
}

// The page's own state changes at once, in the order of the person's actions; the server's
// follows in the queue.

// The frame's prompts go, clicks and imported masks alike (the server forgets both).
function clearFrame() {
  const frameIndex = state.frameIndex;
  const prompted = (id) => state.points.has(pointKey(frameIndex, id)) || state.given.has(pointKey(frameIndex, id));
  const objectIds = state.objects.filter(prompted);
  for (const objectId of objectIds) {
    state.points.delete(pointKey(frameIndex, objectId));
    state.given.delete(pointKey(frameIndex, objectId));
  }
  renderObjects();
  drawOverlay();
  drawTimeline();
  run(async () => {
    for (const objectId of objectIds) {
      applyMasks(await withSession((sessionId) => sendPoints(sessionId, frameIndex, objectId, [])));
    }
    drawTimeline();
  });
}

function clearAll() {
  state.epoch++; // answers to earlier clicks no longer apply
  state.points.clear();
  state.given.clear();
  state.annotations.clear();
  resetProgress();
  renderObjects();
  drawOverlay();
  drawTimeline();
  run(async () => {
    await withSession((sessionId) => graphql(Q.clearVideo, { input: { sessionId } }));
    say("Every point and mask is cleared.");
  });
}

// ---- propagation

async function startPropagation() {
  stopPlaying();
  const controller = new AbortController();
  state.propagation = controller;
  updateButtons();
  const startFrame = state.frameIndex;
  let done = 0;
  let total = state.video.frameCount;
  const from = `from frame ${startFrame + 1}`;
  state.propagated = new Set();
  delete ui.editor.dataset.propagated;
  ui.progress.value = 0;
  ui.progressLabel.textContent = `Propagating ${from}…`;
  const onFrame = ({ frameIndex, frameTotal, results }) => {
    done++;
    total = frameTotal;
    state.propagated.add(frameIndex);
    applyMasks({
      frameIndex,
      rleMaskList: results.map((item) => ({ objectId: item.object_id, rleMask: item.mask })),
    });
    ui.progress.value = done / total;
    ui.progressLabel.textContent = `${done} / ${total} frames ${from}`;
    if (done % 8 === 0) drawTimeline();
  };
  await run(async () => {
    let outcome = "done";
    try {
      const bounds = { direction: ui.direction.value, endFrameIndex: state.endFrame };
      // Refused before its first frame (the client's limit), it waits and starts again.
      await withWaits(() =>
        withSession((sessionId) => propagate(sessionId, startFrame, onFrame, controller.signal, bounds)),
      );
    } catch (error) {
      if (error.name !== "AbortError") {
        outcome = "failed";
        throw error;
      }
    } finally {
      state.propagation = null;
      state.propagated = null;
      // Cancelled: the server may end the stream itself before the page aborts it.
      if (controller.cancelled || controller.signal.aborted) outcome = "cancelled";
      ui.progressLabel.textContent = {
        done: `Done: ${done} frames ${from}.`,
        cancelled: `Cancelled after ${done} of ${total} frames ${from}.`,
        failed: `Stopped after ${done} of ${total} frames ${from}.`,
      }[outcome];
      ui.editor.dataset.propagated = outcome;
      drawTimeline();
      updateButtons();
    }
  }, { retry: false });
}

function resetProgress() {
  ui.progress.value = 0;
  ui.progressLabel.textContent = "";
  delete ui.editor.dataset.propagated;
}

async function cancelPropagation() {
  const controller = state.propagation;
  if (!controller) return;
  controller.cancelled = true;
  ui.cancel.disabled = true;
  try {
    await graphql(Q.cancel, { input: { sessionId: state.sessionId } });
  } catch {
    // Closing the stream stops the server's propagation as well.
  }
  controller.abort();
}

// ---- playback

function stopPlaying() {
  state.playing = null;
  ui.play.textContent = "Play";
}

async function play() {
  if (state.playing) {
    stopPlaying();
    return;
  }
  const playing = {}; // this playback; one started later replaces it
  state.playing = playing;
  ui.play.textContent = "Pause";
  const frameMs = 1000 / state.video.fps;
  let frameIndex = state.frameIndex >= state.video.frameCount - 1 ? 0 : state.frameIndex;
  while (state.playing === playing && frameIndex < state.video.frameCount) {
    const started = performance.now();
    state.frames.prefetch(frameIndex + 1, PREFETCH_FRAMES, state.video.frameCount);
    await showFrame(frameIndex);
    const wait = frameMs - (performance.now() - started);
    if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
    frameIndex++;
  }
  if (state.playing === playing) stopPlaying();
}

function goTo(frameIndex) {
  stopPlaying();
  const last = state.video.frameCount - 1;
  const target = Math.min(Math.max(Math.round(frameIndex), 0), last);
  showFrame(target);
  state.frames.prefetch(target + 1, 4, state.video.frameCount);
}

// The selected object's next clicked frame after the one shown (direction 1), or the previous
// one (-1); none: stay.
function stepToAnchor(direction) {
  const frames = anchors(state.selected);
  const next = direction > 0
    ? frames.find((frameIndex) => frameIndex > state.frameIndex)
    : frames.findLast((frameIndex) => frameIndex < state.frameIndex);
  if (next !== undefined) goTo(next);
}

function timelineFrame(event) {
  const box = ui.timeline.getBoundingClientRect();
  return Math.floor(((event.clientX - box.left) * state.video.frameCount) / box.width);
}

// ---- export and import

// The video's name as people know it: an upload keeps its file's name (the server renders it);
// the path's last part (a content hash for uploads) only where there is none.
function videoName() {
  return ui.name.dataset.name || state.video.path.split("/").pop();
}

function stem() {
  return videoName().replace(/\.[^.]*$/, "");
}

function download(blob, name) {
  const url = URL.createObjectURL(blob);
  const link = Object.assign(document.createElement("a"), { href: url, download: name });
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60_000);
}

// An object's clicks on a frame as addPoints takes them (sendPoints), for the export.
function clicksOf(frameIndex, objectId) {
  const points = state.points.get(pointKey(frameIndex, objectId));
  if (!points?.length) return null;
  const { width, height } = state.video;
  return { points: points.map((p) => [p.x / width, p.y / height]), labels: points.map((p) => p.label) };
}

function exportJson() {
  run(async () => {
    const data = state.annotations.toJSON(clicksOf);
    keepExport(data);
    download(new Blob([JSON.stringify(data)], { type: "application/json" }), `${stem()}-annotations.json`);
  });
}

function exportZip() {
  run(async () => {
    say("Making the PNG masks…");
    const response = await fetch("/annotations/masks.zip", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(state.annotations.toJSON()),
    });
    if (!response.ok) throw await refusal(response, (error) => `The masks could not be exported: ${error}`);
    download(await response.blob(), `${stem()}-masks.zip`);
    say("The PNG masks are downloaded.");
  });
}

// The other formats the server converts the annotations to (COCO instances, YOLO labels).
function exportConverted(url, suffix, what) {
  run(async () => {
    say(`Making the ${what} export…`);
    const response = await fetch(url, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(state.annotations.toJSON()),
    });
    if (!response.ok) throw await refusal(response, (error) => `The ${what} export failed: ${error}`);
    download(await response.blob(), `${stem()}-${suffix}`);
    say(`The ${what} export is downloaded.`);
  });
}

async function importFile(file) {
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

// Give the session an annotation file's work. The server imports it frame by frame while this
// client has room in its cost limit and the session engine time; past either it stops, keeps
// the frames it did and answers 429 with Retry-After and the frames that remain. The page waits
// that long, counting down, and sends the remaining frames on top of what was imported
// (append=1), until the import is done; the controls stay disabled meanwhile. With `replay`, the
// receipt of the session whose work this is (every step sends it). The masks of the file's
// frames, as the server answered them.
const RESTORE_TRIES_WITHOUT_PROGRESS = 5;

async function importInto(sessionId, data, { replay = null } = {}) {
  const total = countMasks(data.frames);
  const answered = [];
  let frames = data.frames;
  let append = false;
  let restored = 0;
  let idle = 0; // 429s in a row that imported nothing
  state.importing = true;
  updateButtons();
  try {
    for (;;) {
      const query = new URLSearchParams();
      if (append) query.set("append", "1");
      if (replay) query.set("replay", replay);
      const address = `/sessions/${encodeURIComponent(sessionId)}/annotations${query.size ? `?${query}` : ""}`;
      const response = await fetch(address, {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ video: data.video, frames }),
      });
      const body = await response.json().catch(() => ({}));
      if (response.ok) {
        answered.push(...body.frames);
        return { frames: answered };
      }
      const wait = Number(response.headers.get("Retry-After"));
      if (response.status !== 429 || !(wait > 0) || idle >= RESTORE_TRIES_WITHOUT_PROGRESS) {
        const message = pageFrames(body.error) ?? `the import failed (${response.status})`;
        const partly = restored ? ` (${restored} of ${total} masks were restored, the rest were not)` : "";
        throw new ApiError(`${message}${partly}`, body.code);
      }
      // Stopped part way (imported_frames), or before it began (a 429 without them).
      const imported = new Set(body.imported_frames ?? []);
      const done = frames.filter((frame) => imported.has(frame.frame_index));
      restored += countMasks(done);
      answered.push(...(body.frames ?? []));
      frames = frames.filter((frame) => !imported.has(frame.frame_index));
      append ||= imported.size > 0;
      idle = imported.size ? 0 : idle + 1;
      for (let left = wait; left > 0; left--) {
        say(`Restored ${restored} of ${total} masks; continuing in ${left} s.${waitingNote()}`);
        await sleep(1000);
      }
      say(`Restored ${restored} of ${total} masks; continuing…${waitingNote()}`);
    }
  } finally {
    state.importing = false;
    updateButtons();
  }
}

function countMasks(frames) {
  return frames.reduce((count, frame) => count + frame.objects.length, 0);
}

// ---- controls

function updateButtons() {
  const busy = !state.sessionId || Boolean(state.propagation) || state.importing;
  // Imported masks are prompts too: propagation starts from them as from clicks.
  ui.propagate.disabled = busy || (state.points.size === 0 && state.given.size === 0);
  ui.propagate.hidden = Boolean(state.propagation);
  ui.cancel.hidden = !state.propagation;
  ui.cancel.disabled = false;
  for (const control of [ui.addObject, ui.clearFrame, ui.clearAll, ui.exportJson, ui.exportZip, ui.importFile]) {
    control.disabled = busy;
  }
  for (const button of ui.objects.querySelectorAll("button")) button.disabled = busy;
  for (const control of [ui.exportCoco, ui.exportYolo]) control.disabled = busy;
}

// Where typing must stay typing: the go-to box handles its own Enter and Escape.
const TEXT_FIELDS = [
  "textarea",
  "select",
  "input:not([type=range], [type=button], [type=submit], [type=reset], [type=checkbox], [type=radio], [type=file], [type=color])",
].join(", ");

function inTextField(target) {
  return target instanceof Element && (target.isContentEditable || target.closest(TEXT_FIELDS) !== null);
}

function onKey(event) {
  if (event.ctrlKey || event.metaKey || event.altKey || inTextField(event.target)) return;
  const last = state.video.frameCount - 1;
  if (event.key === "ArrowLeft") goTo(state.frameIndex - 1);
  else if (event.key === "ArrowRight") goTo(state.frameIndex + 1);
  else if (event.key === "[") stepToAnchor(-1);
  else if (event.key === "]") stepToAnchor(1);
  else if (event.key === "Home") goTo(0);
  else if (event.key === "End") goTo(last);
  else if (event.key === "g" || event.key === "G") ui.goto.focus();
  else if (event.key === "e" || event.key === "E") markEnd();
  else if (event.key === "p" || event.key === "P") {
    if (!ui.propagate.disabled) startPropagation();
  } else if (event.key === " ") play();
  else return;
  // The key is the page's: the focused scrubber does not step as well, a focused button is not
  // pressed, and the G does not land in the go-to box.
  event.preventDefault();
}

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
  ui.startAgain.addEventListener("click", startAgain);
  ui.importFile.addEventListener("change", () => {
    const [file] = ui.importFile.files;
    ui.importFile.value = "";
    if (file) importFile(file);
  });
  // Before the focused control sees them (capture), so that the keys answer after a click on a
  // button or the scrubber, and Space does not press the focused button too.
  addEventListener("keydown", onKey, { capture: true });
  addEventListener("resize", drawTimeline);
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
  state.annotations = new Annotations(path);
  wire();
  const resumed = new URLSearchParams(location.search).get("session");
  // A reload comes back to the frame, the end and the direction it left.
  const place = recallPlace(resumed);
  state.endFrame = place.end;
  ui.direction.value = place.direction;
  try {
    if (!resumed) {
      addObject();
      await startSession();
    } else if (!(await resume(resumed))) {
      sessionEnded(resumed);
    }
  } catch (error) {
    complain(`The video cannot be opened: ${error.message}`);
    return;
  }
  renderObjects();
  keepAlive();
  keepReceipt();
  ui.play.disabled = ui.scrubber.disabled = ui.goto.disabled = false;
  updateButtons();
  drawTimeline();
  await showFrame(place.frame);
  state.frames.prefetch(place.frame + 1, PREFETCH_FRAMES, frameCount);
  ui.editor.dataset.ready = "true";
}

open();
