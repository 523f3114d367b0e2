// A propagation from the frame shown, run by the server as a job (propagation_jobs.js), which
// goes on when the page closes; its progress and the frames it stores, followed about once a
// second, and its cancel. A page that opens, or comes back into view, while a job of the
// browser's runs on its video follows that one the same way, whichever page started it, and
// may cancel it. The controls stay disabled while a job runs: the server holds the session for
// it.

import { READ_FRAMES_MAX } from "./annotations.js";
import { updateButtons } from "./controls.js";
import { ui } from "./elements.js";
import { pageFrames } from "./frame_numbers.js";
import { drawOverlay } from "./frame_view.js";
import { Runs } from "./mask_runs.js";
import { complain } from "./messages.js";
import { stopPlaying } from "./playback.js";
import { cancelJob, framesStored, listJobs, runningJob, startJob } from "./propagation_jobs.js";
import { run, withWaits } from "./queue.js";
import { reopen, withSession } from "./session.js";
import { state } from "./state.js";
import { loadMaskRuns } from "./stored_work.js";
import { drawTimeline } from "./timeline.js";

const POLL_MS = 1000;
const FIRST_POLL_MS = 300;
// The frames one look reads from the store: a job that stores more in a second (tiny frames) is
// followed by its runs, and the window's masks read again.
const READ_PER_POLL = 2 * READ_FRAMES_MAX;
const FAILED_POLLS_MAX = 30; // looks in a row that fail (a server restarting) before giving up

export function startPropagation() {
  stopPlaying();
  const startFrame = state.frameIndex;
  const bounds = { direction: ui.direction.value, endFrameIndex: state.endFrame };
  const follower = begin(`Propagating from frame ${startFrame + 1}…`);
  run(
    async () => {
      let job;
      try {
        // Refused before it starts (the client's limit), it waits and is sent again.
        job = await withWaits(() => withSession((sessionId) => startJob(sessionId, startFrame, bounds)));
      } catch (error) {
        end(follower, null);
        complain(error.message);
        // Refused as one runs already (another page's): this page follows that one.
        await followRunningJob();
        return;
      }
      await follow(follower, job, 0);
    },
    { retry: false },
  );
}

// The browser's job running on the video, if one does, followed as if this page had started it.
export async function followRunningJob() {
  if (state.propagation || !state.sessionId) return;
  let job;
  try {
    job = await runningJob(state.video.path);
  } catch {
    return; // the next look (the page shown again, a refused start) asks again
  }
  if (!job || state.propagation) return;
  const follower = begin("");
  for (const [first, last] of framesStored(job, state.video.frameCount, 0, job.done)) {
    for (let index = first; index <= last; index++) state.propagated.add(index);
  }
  run(
    async () => {
      // What it stored before this page looked, up to now at least, is read with the runs.
      try {
        if (await loadMaskRuns(state.sessionId)) await state.annotations.show(state.frameIndex);
      } catch {
        // the frames come with the looks, and all of them at the job's end
      }
      drawOverlay();
      drawTimeline();
      await follow(follower, job, job.done);
    },
    { retry: false },
  );
}

export function resetProgress() {
  ui.progress.value = 0;
  ui.progressLabel.textContent = "";
  delete ui.editor.dataset.propagated;
}

export async function cancelPropagation() {
  const follower = state.propagation;
  if (!follower?.job || follower.cancelling) return;
  follower.cancelling = true;
  updateButtons();
  try {
    await cancelJob(follower.job.id);
  } catch (error) {
    follower.cancelling = false;
    updateButtons();
    complain(`The propagation could not be cancelled: ${error.message}`);
    return;
  }
  follower.wake?.();
}

function begin(label) {
  stopPlaying();
  const follower = { job: null, cancelling: false, wake: null };
  state.propagation = follower;
  state.propagated = new Runs();
  delete ui.editor.dataset.propagated;
  ui.progress.value = 0;
  ui.progressLabel.textContent = label;
  updateButtons();
  return follower;
}

// Look at the job about once a second until it ends: its progress shown, the frames it stored
// since the last look (past the `seen`th) read from the store; then every frame as the store has
// it.
async function follow(follower, job, seen) {
  follower.job = job;
  ui.editor.dataset.job = job.id;
  updateButtons();
  showProgress(job);
  let failures = 0;
  let last = job;
  while (last.status === "running") {
    await pause(follower, seen === 0 ? FIRST_POLL_MS : POLL_MS);
    try {
      const now = (await listJobs()).find((item) => item.id === job.id) ?? gone(last);
      await readFrames(job, seen, now.done);
      seen = now.done;
      last = now;
      failures = 0;
    } catch (error) {
      // The page's session has gone (a server restart, whose job another session took up): a
      // new one, which is the job's while it runs.
      if (error.status === 404) await reopen().catch(() => {});
      if (++failures < FAILED_POLLS_MAX) continue;
      last = { ...last, status: "failed", reason: `its progress cannot be read: ${error.message}` };
      break;
    }
    showProgress(last);
  }
  try {
    // Every frame as the store has it, whatever the looks missed (a cancel's last frame).
    if (await loadMaskRuns(state.sessionId)) await state.annotations.show(state.frameIndex);
    else await reopen(); // the job's session closed with the job: a new one, with the work
  } catch (error) {
    complain(error.message);
  }
  end(follower, last);
}

function gone(last) {
  return { ...last, status: "failed", reason: "the server no longer lists it" };
}

// Wait, or less if the cancel wakes the follower.
function pause(follower, ms) {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    follower.wake = () => {
      clearTimeout(timer);
      resolve();
    };
  });
}

// The frames the job stored after its `from`th up to its `to`th: read from the store, a few
// reads at most; more than that, and the runs are read again with the window.
async function readFrames(job, from, to) {
  const ranges = framesStored(job, state.video.frameCount, from, to);
  if (!ranges.length) return;
  let count = 0;
  for (const [first, last] of ranges) {
    count += last - first + 1;
    for (let index = first; index <= last; index++) state.propagated.add(index);
  }
  if (count > READ_PER_POLL) {
    if (!(await loadMaskRuns(state.sessionId))) {
      throw Object.assign(new Error("the session has ended"), { status: 404 });
    }
    await state.annotations.show(state.frameIndex);
  } else {
    for (const [first, last] of ranges) {
      for (let at = first; at <= last; at += READ_FRAMES_MAX) {
        await state.annotations.refresh(at, Math.min(at + READ_FRAMES_MAX - 1, last));
      }
    }
  }
  drawOverlay();
  drawTimeline();
}

function showProgress(job) {
  ui.progress.value = job.frames ? job.done / job.frames : 0;
  ui.progressLabel.textContent = `${job.done} / ${job.frames} frames ${from(job)}`;
}

function from(job) {
  return `from frame ${job.start_frame_index + 1}`;
}

// The propagation has ended (job null: it never started): its outcome said, the page usable.
function end(follower, job) {
  if (state.propagation === follower) {
    state.propagation = null;
    state.propagated = null;
  }
  delete ui.editor.dataset.job;
  if (job === null) {
    resetProgress();
  } else {
    const outcome = { running: "failed", done: "done", cancelled: "cancelled", failed: "failed" }[job.status];
    ui.progressLabel.textContent = {
      done: `Done: ${job.done} frames ${from(job)}.`,
      cancelled: `Cancelled after ${job.done} of ${job.frames} frames ${from(job)}.`,
      failed: `Stopped after ${job.done} of ${job.frames} frames ${from(job)}.`,
    }[outcome];
    if (outcome === "failed") complain(`The propagation stopped: ${pageFrames(job.reason || "it failed")}`);
    ui.editor.dataset.propagated = outcome;
  }
  drawOverlay();
  drawTimeline();
  updateButtons();
}
