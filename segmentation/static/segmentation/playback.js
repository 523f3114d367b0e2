// Playing the video with its masks, and moving to a frame: by number, or to the selected
// object's next or previous clicked frame.

import { ui } from "./elements.js";
import { showFrame } from "./frame_view.js";
import { anchors } from "./prompts.js";
import { state } from "./state.js";

export const PREFETCH_FRAMES = 24;

export function stopPlaying() {
  state.playing = null;
  ui.play.textContent = "Play";
}

export async function play() {
  if (state.playing) {
    stopPlaying();
    return;
  }
  const playing = {}; // this playback; one started later replaces it
  state.playing = playing;
  ui.play.textContent = "Pause";
  const frameMs = 1000 / state.video.fps;
  let frameIndex = state.frameIndex >= state.video.frameCount - 1 ? 0 : state.frameIndex;
  while (state.playing === playing && frameIndex < state.video.frameCount) {
    const started = performance.now();
    state.frames.prefetch(frameIndex + 1, PREFETCH_FRAMES, state.video.frameCount);
    await showFrame(frameIndex);
    const wait = frameMs - (performance.now() - started);
    if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
    frameIndex++;
  }
  if (state.playing === playing) stopPlaying();
}

export function goTo(frameIndex) {
  stopPlaying();
  const last = state.video.frameCount - 1;
  const target = Math.min(Math.max(Math.round(frameIndex), 0), last);
  showFrame(target);
  state.frames.prefetch(target + 1, 4, state.video.frameCount);
}

// The selected object's next clicked frame after the one shown (direction 1), or the previous
// one (-1); none: stay.
export function stepToAnchor(direction) {
  const frames = anchors(state.selected);
  const next = direction > 0
    ? frames.find((frameIndex) => frameIndex > state.frameIndex)
    : frames.findLast((frameIndex) => frameIndex < state.frameIndex);
  if (next !== undefined) goTo(next);
}
