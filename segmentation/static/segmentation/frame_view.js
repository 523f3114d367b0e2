// The frame shown and what is drawn over it: its image, its masks (as the server sends them, read
// from the session's store when the page holds none of the frame's), the points clicked on it and
// the box being dragged.

import { ui } from "./elements.js";
import { complain } from "./messages.js";
import { decideColours, objectColour } from "./object_colours.js";
import { renderObjects } from "./object_list.js";
import { drawBox, drawPoints, maskImage } from "./overlay.js";
import { pointKey } from "./prompts.js";
import { showEnd } from "./propagation_end.js";
import { state } from "./state.js";
import { keepPlace } from "./tab_storage.js";
import { drawTimeline } from "./timeline.js";

const POINT_RADIUS_PX = 7; // on screen

export function pointRadius() {
  return (POINT_RADIUS_PX * ui.overlay.width) / Math.max(ui.overlay.clientWidth, 1);
}

export async function showFrame(frameIndex) {
  state.frameIndex = frameIndex;
  ui.scrubber.value = frameIndex;
  ui.frameLabel.textContent = `${frameIndex + 1} / ${state.video.frameCount}`;
  showEnd();
  drawTimeline();
  keepPlace();
  const request = ++state.drawn;
  // The masks come from the store beside the image; a read that fails is tried again on the
  // next frame shown, and the frame is drawn without them meanwhile.
  const masks = state.annotations.show(frameIndex).catch(() => {});
  let image;
  try {
    [image] = await Promise.all([state.frames.get(frameIndex), masks]);
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

export function drawOverlay() {
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

// Masks from the server; those of objects removed meanwhile are dropped.
export function applyMasks({ frameIndex, rleMaskList }) {
  state.annotations.setMasks(
    frameIndex,
    rleMaskList
      .filter((item) => state.objects.includes(item.objectId))
      .map((item) => ({ objectId: item.objectId, rle: item.rleMask })),
  );
  if (frameIndex === state.frameIndex) drawOverlay();
}
