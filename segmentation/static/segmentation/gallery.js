// The gallery: the server's videos with their posters, a page at a time, and uploads of new
// ones: sent to POST /uploads (with the sending's progress), then prepared on the server while
// the page follows them (GET /uploads: how far each has come, why one failed) and offers to
// cancel them; picking a video opens it in the annotator, where a video this browser's
// propagation job runs on (marked on its card) shows the job's progress.

import { ApiError, graphql } from "./graphql.js";

const PAGE_SIZE = 24;
const VIDEO_FIELDS = "id path posterUrl width height frameCount fps";
const PAGE_QUERY = `query Gallery($after: String) {
  defaultVideo { id }
  videos(first: ${PAGE_SIZE}, after: $after) {
    pageInfo { hasNextPage endCursor }
    edges { node { ${VIDEO_FIELDS} } }
  }
}`;
const UPLOADS = "/uploads";
const FOLLOW_MS = 1000; // how often the uploads being prepared are asked after

const gallery = document.getElementById("videos");
const more = document.getElementById("more");
const message = document.getElementById("message");
const preparationList = document.getElementById("preparations");
const maxUploadBytes = Number(gallery.dataset.maxUploadBytes);
let endCursor = null;
// The uploads this page sent, by ID: opened in the annotator once ready.
const sentHere = new Set();
let shown = new Map(); // ID → the upload as last shown
let following = null;

function annotateUrl(videoId) {
  return `/annotate/?video=${encodeURIComponent(videoId)}`;
}

// The names people gave their uploads (the GraphQL Video type, SAM 2's, has none): path → name.
async function namesOf(paths) {
  if (!paths.length) return {};
  const query = new URLSearchParams(paths.map((path) => ["path", path]));
  try {
    const response = await fetch(`/videos/names?${query}`);
    return response.ok ? (await response.json()).names : {};
  } catch {
    return {}; // the cards fall back to the file names
  }
}

function card(video, name, isDefault) {
  const link = document.createElement("a");
  link.className = "video-card";
  link.href = annotateUrl(video.id);
  link.dataset.path = video.path;
  const poster = document.createElement("img");
  poster.src = video.posterUrl;
  poster.alt = "";
  poster.loading = "lazy";
  link.title = name;
  const label = document.createElement("strong");
  label.className = "video-name";
  label.textContent = name;
  const details = document.createElement("span");
  details.className = "muted";
  details.textContent = `${video.width}×${video.height} · ${(video.frameCount / video.fps).toFixed(1)} s`;
  link.append(poster, label, details);
  if (isDefault) {
    const badge = document.createElement("span");
    badge.className = "badge live";
    badge.textContent = "default";
    link.append(badge);
  }
  return link;
}

async function loadPage() {
  more.disabled = true;
  try {
    const data = await graphql(PAGE_QUERY, { after: endCursor });
    const videos = data.videos.edges.map(({ node }) => node);
    const names = await namesOf(videos.map((video) => video.path));
    for (const video of videos) {
      const name = names[video.path] ?? video.path.split("/").pop();
      gallery.append(card(video, name, video.id === data.defaultVideo.id));
    }
    endCursor = data.videos.pageInfo.endCursor;
    more.hidden = !data.videos.pageInfo.hasNextPage;
    markJobs();
  } catch (error) {
    showError(`The videos could not be listed: ${error.message}`);
  } finally {
    more.disabled = false;
  }
}

// The cards of the videos a propagation job of this browser's runs on, marked with how far it
// has come when the page lists them (the annotator follows it as it goes).
async function markJobs() {
  let jobs;
  try {
    const response = await fetch("/propagations");
    if (!response.ok) return;
    jobs = (await response.json()).jobs;
  } catch {
    return; // the cards are the same without their marks
  }
  for (const job of jobs.filter((item) => item.status === "running")) {
    for (const link of gallery.querySelectorAll(".video-card")) {
      if (link.dataset.path !== job.video) continue;
      const mark = link.querySelector(".job-mark") ?? document.createElement("span");
      mark.className = "job-mark";
      mark.textContent = `Propagating: ${job.done} / ${job.frames} frames`;
      link.append(mark);
    }
  }
}

function showError(text) {
  message.textContent = text;
  message.classList.add("error");
}

// POST /uploads with the file; the upload, queued (its preparation follows on the server).
function send(file, onProgress) {
  const form = new FormData();
  form.append("file", file, file.name);
  return new Promise((resolve, reject) => {
    const request = new XMLHttpRequest();
    request.open("POST", UPLOADS);
    request.upload.addEventListener("progress", (event) => {
      if (event.lengthComputable) onProgress(event.loaded / event.total);
    });
    request.addEventListener("load", () => {
      let body = null;
      try {
        body = JSON.parse(request.responseText);
      } catch {
        reject(new ApiError(`The server answered ${request.status}.`, "HTTP"));
        return;
      }
      if (request.status === 202) resolve(body);
      // the edge's own refusal of a body over the cap is GraphQL-shaped
      else {
        const text = body.error ?? body.errors?.[0]?.message ?? `The server answered ${request.status}.`;
        reject(new ApiError(text, body.code ?? "HTTP"));
      }
    });
    request.addEventListener("error", () =>
      reject(new ApiError("The upload failed: the connection to the server was lost.", "NETWORK")),
    );
    request.send(form);
  });
}

async function uploadVideo(file) {
  message.textContent = "";
  message.classList.remove("error");
  if (file.size > maxUploadBytes) {
    showError(`${file.name} is larger than the limit of ${Math.floor(maxUploadBytes / 2 ** 20)} MB.`);
    return;
  }
  const box = document.getElementById("upload");
  const bar = document.getElementById("upload-progress");
  const label = document.getElementById("upload-label");
  box.hidden = false;
  bar.value = 0;
  label.textContent = `Uploading ${file.name}…`;
  try {
    const queued = await send(file, (share) => {
      bar.value = share;
      label.textContent = `Uploading ${file.name}: ${Math.round(share * 100)} %`;
    });
    sentHere.add(queued.id);
    box.hidden = true;
    showPreparations([...shown.values(), queued]);
    follow();
  } catch (error) {
    box.hidden = true;
    showError(`${file.name} was not added: ${error.message}`);
  }
}

function stateText(item) {
  if (item.state === "queued") return `${item.name}: waiting for its turn to be prepared`;
  if (item.state === "preparing") {
    const frames = item.framesTotal ? ` (frame ${item.framesDone} of about ${item.framesTotal})` : "";
    return `Preparing ${item.name}: ${Math.floor(item.progress * 100)} %${frames}`;
  }
  return `${item.name} was not added: ${item.failure}`;
}

function preparationRow(item) {
  const row = document.createElement("li");
  row.className = "preparation";
  row.dataset.id = item.id;
  row.dataset.state = item.state;
  const failed = item.state === "failed";
  if (!failed) {
    const bar = document.createElement("progress");
    bar.max = 1;
    bar.value = item.progress;
    row.append(bar);
  }
  const label = document.createElement("span");
  label.className = failed ? "preparation-label error" : "preparation-label muted";
  label.textContent = stateText(item);
  const button = document.createElement("button");
  button.type = "button";
  button.className = "preparation-cancel";
  button.textContent = failed ? "Dismiss" : "Cancel";
  button.addEventListener("click", () => cancel(item, button));
  row.append(label, button);
  return row;
}

function showPreparations(items) {
  shown = new Map(items.map((item) => [item.id, item]));
  preparationList.replaceChildren(...items.map(preparationRow));
}

async function cancel(item, button) {
  button.disabled = true;
  try {
    const response = await fetch(`${UPLOADS}/${item.id}`, { method: "DELETE" });
    if (!response.ok && response.status !== 404) throw new Error(`the server answered ${response.status}`);
    sentHere.delete(item.id);
    showPreparations([...shown.values()].filter((other) => other.id !== item.id));
  } catch (error) {
    button.disabled = false;
    showError(`${item.name} could not be cancelled: ${error.message}`);
  }
}

// One look at the uploads being prepared: the list redrawn, the gallery reloaded when one is
// ready (opened if this page sent it); asked again while any is unfinished.
async function followOnce() {
  following = null;
  let items;
  try {
    const response = await fetch(UPLOADS);
    items = (await response.json()).uploads;
  } catch {
    following = setTimeout(followOnce, FOLLOW_MS * 5); // the server may be restarting
    return;
  }
  const gone = [...shown.keys()].filter((id) => !items.some((item) => item.id === id));
  showPreparations(items);
  for (const id of gone) {
    if (!sentHere.has(id)) continue;
    const response = await fetch(`${UPLOADS}/${id}`);
    const upload = response.ok ? await response.json() : null;
    if (upload?.state === "ready") {
      location.assign(annotateUrl(upload.video));
      return;
    }
  }
  if (gone.length) reloadVideos();
  if (items.some((item) => item.state !== "failed")) follow();
}

function follow() {
  if (following === null) following = setTimeout(followOnce, FOLLOW_MS);
}

function reloadVideos() {
  endCursor = null;
  gallery.replaceChildren();
  loadPage();
}

document.getElementById("upload-file").addEventListener("change", (event) => {
  const [file] = event.target.files;
  event.target.value = "";
  if (file) uploadVideo(file);
});
document.addEventListener("dragover", (event) => event.preventDefault());
document.addEventListener("drop", (event) => {
  event.preventDefault();
  const [file] = event.dataTransfer.files;
  if (file) uploadVideo(file);
});
more.addEventListener("click", loadPage);
loadPage();
followOnce();
