// The gallery: the server's videos with their posters, a page at a time, and uploads of new
// ones (with progress); picking a video opens it in the annotator.

import { graphql, upload } from "./graphql.js";

const PAGE_SIZE = 24;
const VIDEO_FIELDS = "id path posterUrl width height frameCount fps";
const PAGE_QUERY = `query Gallery($after: String) {
  defaultVideo { id }
  videos(first: ${PAGE_SIZE}, after: $after) {
    pageInfo { hasNextPage endCursor }
    edges { node { ${VIDEO_FIELDS} } }
  }
}`;
const UPLOAD_MUTATION = `mutation Upload($file: Upload!) { uploadVideo(file: $file) { id } }`;

const gallery = document.getElementById("videos");
const more = document.getElementById("more");
const message = document.getElementById("message");
const maxUploadBytes = Number(gallery.dataset.maxUploadBytes);
let endCursor = null;

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
  } catch (error) {
    showError(`The videos could not be listed: ${error.message}`);
  } finally {
    more.disabled = false;
  }
}

function showError(text) {
  message.textContent = text;
  message.classList.add("error");
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
    const data = await upload(UPLOAD_MUTATION, {}, "file", file, (share) => {
      bar.value = share;
      label.textContent =
        share < 1 ? `Uploading ${file.name}: ${Math.round(share * 100)} %` : `Preparing ${file.name}…`;
    });
    label.textContent = `${file.name} is ready.`;
    location.assign(annotateUrl(data.uploadVideo.id));
  } catch (error) {
    box.hidden = true;
    showError(`${file.name} was not added: ${error.message}`);
  }
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
