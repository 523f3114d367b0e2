// The work the server keeps for the session (docs/segmentation-api.md): read when the page
// opens a session, takes one up after a reload, or has the session's work replaced by an import.
// Its summary gives the page its objects, each one's clicks and imported masks, and which frames
// have masks, as runs; the masks themselves come a window at a time (annotations.js).

import { ApiError } from "./graphql.js";
import { pointKey } from "./prompts.js";
import { state } from "./state.js";

// The session's work in the page, in place of what it held; false if the server no longer has
// the session (or it is another video's).
export async function loadWork(sessionId) {
  const body = await summary(sessionId);
  if (!body) return false;
  adoptWork(body.objects);
  return true;
}

// Which frames have masks, read again (after a propagation job, whose prompts are the page's
// already); the window of masks is read again too. False if the server no longer has the session.
export async function loadMaskRuns(sessionId) {
  const body = await summary(sessionId);
  if (!body) return false;
  state.annotations.reset(body.objects.filter((item) => state.objects.includes(item.object_id)));
  return true;
}

async function summary(sessionId) {
  const response = await fetch(`/sessions/${encodeURIComponent(sessionId)}/work`);
  if (response.status === 404) return null;
  const body = await response.json().catch(() => ({}));
  if (!response.ok) throw new ApiError(body.error ?? `the work could not be read (${response.status})`, body.code);
  if (body.kept && body.video !== state.video.path) return null;
  return body;
}

function adoptWork(objects) {
  state.points = new Map();
  state.given = new Set();
  // The store keeps clicks as the engine does, scaled from [0, 1] by (width - 1, height - 1);
  // the page keeps them scaled by (width, height), as it sends them.
  const { width, height } = state.video;
  const sx = width / Math.max(width - 1, 1);
  const sy = height / Math.max(height - 1, 1);
  for (const item of objects) {
    for (const prompt of item.prompts) {
      const key = pointKey(prompt.frame_index, item.object_id);
      if (!prompt.points) state.given.add(key);
      else state.points.set(key, prompt.points.map(([x, y], i) => ({ x: x * sx, y: y * sy, label: prompt.labels[i] })));
    }
  }
  const ids = objects.map((item) => item.object_id);
  state.objects = ids.length ? ids : [1];
  state.nextObjectId = Math.max(...state.objects) + 1;
  if (!state.objects.includes(state.selected)) state.selected = state.objects[0];
  state.annotations.reset(objects);
}
