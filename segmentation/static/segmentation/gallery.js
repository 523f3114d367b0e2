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

function card(video, isDefault) {
  const link = document.createElement("a");
  link.className = "video-card";
  link.href = annotateUrl(video.id);
  link.dataset.path = video.path;
  const poster = document.createElement("img");
  poster.src = video.posterUrl;
  poster.alt = "";
  poster.loading = "lazy";
  const name = document.createElement("strong");
  name.textContent = video.path.split("/").pop();
  const details = document.createElement("span");
  details.className = "muted";
  details.textContent = `${video.width}×${video.height} · ${(video.frameCount / video.fps).toFixed(1)} s`;
  link.append(poster, name, details);
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
    for (const { node } of data.videos.edges) gallery.append(card(node, node.id === data.defaultVideo.id));
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
