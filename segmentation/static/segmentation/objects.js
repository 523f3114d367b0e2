// The objects: one selected, one added, one removed (with its masks and prompts, on the page at
// once and then on the server).

import { applyMasks, drawOverlay } from "./frame_view.js";
import { graphql } from "./graphql.js";
import { renderObjects } from "./object_list.js";
import { Q } from "./queries.js";
import { run } from "./queue.js";
import { withSession } from "./session.js";
import { state } from "./state.js";
import { drawTimeline } from "./timeline.js";

export function selectObject(objectId) {
  state.selected = objectId;
  renderObjects();
  drawTimeline();
}

export function addObject() {
  const objectId = state.nextObjectId++;
  state.objects.push(objectId);
  selectObject(objectId);
}

export function removeObject(objectId) {
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
