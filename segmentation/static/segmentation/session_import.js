// An annotation file's work given to a session, past the server's limits: a person's import.

import { updateButtons } from "./controls.js";
import { pageFrames } from "./frame_numbers.js";
import { ApiError } from "./graphql.js";
import { say } from "./messages.js";
import { sleep, waitingNote } from "./queue.js";
import { state } from "./state.js";

// Give the session an annotation file's work. The server imports it frame by frame while this
// client has room in its cost limit and the session engine time; past either it stops, keeps
// the frames it did and answers 429 with Retry-After and the frames that remain. The page waits
// that long, counting down, and sends the remaining frames on top of what was imported
// (append=1), until the import is done; the controls stay disabled meanwhile. The masks of the
// file's frames, as the server answered them.
const RESTORE_TRIES_WITHOUT_PROGRESS = 5;

export async function importInto(sessionId, data) {
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
