// A propagation from the frame shown, its progress as the frames come, and its cancel.

import { updateButtons } from "./controls.js";
import { ui } from "./elements.js";
import { applyMasks } from "./frame_view.js";
import { graphql } from "./graphql.js";
import { stopPlaying } from "./playback.js";
import { propagate } from "./propagation_stream.js";
import { Q } from "./queries.js";
import { run, withWaits } from "./queue.js";
import { withSession } from "./session.js";
import { state } from "./state.js";
import { drawTimeline } from "./timeline.js";

export async function startPropagation() {
  stopPlaying();
  const controller = new AbortController();
  state.propagation = controller;
  updateButtons();
  const startFrame = state.frameIndex;
  let done = 0;
  let total = state.video.frameCount;
  const from = `from frame ${startFrame + 1}`;
  state.propagated = new Set();
  delete ui.editor.dataset.propagated;
  ui.progress.value = 0;
  ui.progressLabel.textContent = `Propagating ${from}…`;
  const onFrame = ({ frameIndex, frameTotal, results }) => {
    done++;
    total = frameTotal;
    state.propagated.add(frameIndex);
    applyMasks({
      frameIndex,
      rleMaskList: results.map((item) => ({ objectId: item.object_id, rleMask: item.mask })),
    });
    ui.progress.value = done / total;
    ui.progressLabel.textContent = `${done} / ${total} frames ${from}`;
    if (done % 8 === 0) drawTimeline();
  };
  await run(async () => {
    let outcome = "done";
    try {
      const bounds = { direction: ui.direction.value, endFrameIndex: state.endFrame };
      // Refused before its first frame (the client's limit), it waits and starts again.
      await withWaits(() =>
        withSession((sessionId) => propagate(sessionId, startFrame, onFrame, controller.signal, bounds)),
      );
    } catch (error) {
      if (error.name !== "AbortError") {
        outcome = "failed";
        throw error;
      }
    } finally {
      state.propagation = null;
      state.propagated = null;
      // Cancelled: the server may end the stream itself before the page aborts it.
      if (controller.cancelled || controller.signal.aborted) outcome = "cancelled";
      ui.progressLabel.textContent = {
        done: `Done: ${done} frames ${from}.`,
        cancelled: `Cancelled after ${done} of ${total} frames ${from}.`,
        failed: `Stopped after ${done} of ${total} frames ${from}.`,
      }[outcome];
      ui.editor.dataset.propagated = outcome;
      drawTimeline();
      updateButtons();
    }
  }, { retry: false });
}

export function resetProgress() {
  ui.progress.value = 0;
  ui.progressLabel.textContent = "";
  delete ui.editor.dataset.propagated;
}

export async function cancelPropagation() {
  const controller = state.propagation;
  if (!controller) return;
  controller.cancelled = true;
  ui.cancel.disabled = true;
  try {
    await graphql(Q.cancel, { input: { sessionId: state.sessionId } });
  } catch {
    // Closing the stream stops the server's propagation as well.
  }
  controller.abort();
}
