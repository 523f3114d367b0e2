// The prompts' edits: the page's own state changes at once, in the order of the person's
// actions; the server's follows in the queue. An object's points on a frame, a frame cleared,
// everything cleared.

import { applyMasks, drawOverlay } from "./frame_view.js";
import { graphql } from "./graphql.js";
import { say } from "./messages.js";
import { renderObjects } from "./object_list.js";
import { pointKey } from "./prompts.js";
import { resetProgress } from "./propagation.js";
import { Q } from "./queries.js";
import { run } from "./queue.js";
import { withSession } from "./session.js";
import { state } from "./state.js";
import { drawTimeline } from "./timeline.js";

// "frame:object" -> the points the server last took for it (undefined: none): the very array
// of `state.points`, which each edit replaces, so an edit since makes it differ.
const sentPoints = new Map();

// The object's prompts on the frame changed in the page: show them, then send them.
export function promptsChanged(frameIndex, objectId) {
  const key = pointKey(frameIndex, objectId);
  drawOverlay(); // the point shows at once; its mask follows
  renderObjects();
  drawTimeline();
  const epoch = state.epoch;
  run(async () => {
    // The points as they are when this turn comes, or is sent again after a wait: clicks made
    // meanwhile are sent together, and a later turn finds them sent and sends nothing.
    const latest = state.points.get(key);
    if (sentPoints.has(key) && sentPoints.get(key) === latest) return;
    const masks = await withSession((sessionId) => sendPoints(sessionId, frameIndex, objectId, latest ?? []));
    sentPoints.set(key, latest);
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

// The frame's prompts go, clicks and imported masks alike (the server forgets both).
export function clearFrame() {
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
      sentPoints.set(pointKey(frameIndex, objectId), undefined);
    }
    drawTimeline();
  });
}

export function clearAll() {
  state.epoch++; // answers to earlier clicks no longer apply
  state.points.clear();
  sentPoints.clear();
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
