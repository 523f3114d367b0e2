// The downloads: the session's annotation file, as the server exports it from the work it
// keeps, and the PNG masks, COCO and YOLO files the server converts it to, named after the
// video. The page never holds the whole of one where the session keeps its work: the browser
// saves the server's stream as it comes, whatever the video's length.

import { ui } from "./elements.js";
import { refusal } from "./graphql.js";
import { say } from "./messages.js";
import { run } from "./queue.js";
import { withSession } from "./session.js";
import { state } from "./state.js";

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

// A download the browser saves as the server streams it from the session's stored work.
function downloadStored(path, name, what) {
  return withSession(async (sessionId) => {
    const link = Object.assign(document.createElement("a"), {
      href: `/annotations/${encodeURIComponent(sessionId)}${path}`,
      download: name,
    });
    document.body.append(link);
    link.click();
    link.remove();
    say(`The ${what} download has started.`);
  });
}

// The session's annotations (every mask it has shown, with the clicks), as a Blob.
async function sessionExport() {
  return withSession(async (sessionId) => {
    const response = await fetch(`/annotations/${encodeURIComponent(sessionId)}.json`);
    if (!response.ok) throw await refusal(response, (error) => `The annotations could not be exported: ${error}`);
    return response.blob();
  });
}

function keepsWork() {
  return Boolean(state.keepsWork && state.sessionId);
}

export function exportJson() {
  run(async () => {
    const name = `${stem()}-annotations.json`;
    if (keepsWork()) {
      await downloadStored(".json", name, "annotations");
      return;
    }
    download(await sessionExport(), name);
  });
}

export function exportZip() {
  converted("/annotations/masks.zip", "masks.zip", {
    what: "PNG masks",
    making: "Making the PNG masks…",
    failed: "The masks could not be exported",
    done: "The PNG masks are downloaded.",
  });
}

// The other formats the server converts the annotations to (COCO instances, YOLO labels).
export function exportConverted(url, suffix, what) {
  converted(url, suffix, {
    what,
    making: `Making the ${what} export…`,
    failed: `The ${what} export failed`,
    done: `The ${what} export is downloaded.`,
  });
}

// Converted by the server: from its store where the session keeps its work, else of the
// session's annotation file posted back to it.
function converted(url, suffix, { what, making, failed, done }) {
  run(async () => {
    if (keepsWork()) {
      await downloadStored(`/${suffix}`, `${stem()}-${suffix}`, what);
      return;
    }
    say(making);
    const response = await fetch(url, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: await sessionExport(),
    });
    if (!response.ok) throw await refusal(response, (error) => `${failed}: ${error}`);
    download(await response.blob(), `${stem()}-${suffix}`);
    say(done);
  });
}
