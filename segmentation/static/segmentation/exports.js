// The downloads: the annotation file, made in the page, and the PNG masks, COCO and YOLO files
// the server converts it to, named after the video.

import { ui } from "./elements.js";
import { refusal } from "./graphql.js";
import { say } from "./messages.js";
import { clicksOf } from "./prompts.js";
import { run } from "./queue.js";
import { state } from "./state.js";
import { keepExport } from "./tab_storage.js";

// The video's name as people know it: an upload keeps its file's name (the server renders it);
// the path's last part (a content hash for uploads) only where there is none.
export function videoName() {
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

export function exportJson() {
  run(async () => {
    const data = state.annotations.toJSON(clicksOf);
    keepExport(data);
    download(new Blob([JSON.stringify(data)], { type: "application/json" }), `${stem()}-annotations.json`);
  });
}

export function exportZip() {
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
export function exportConverted(url, suffix, what) {
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
