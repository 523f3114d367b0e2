// The server's propagation jobs (docs/segmentation-api.md, "Propagation jobs"): started on the
// session, listed with their progress to any page of the browser's, cancelled from any of them;
// and which frames a job has stored after so many, in the order it computes them.

import { ApiError, refusal } from "./graphql.js";

// Plain fetches whose failure to connect reads as the GraphQL API's does.
async function send(address, init) {
  try {
    return await fetch(address, init);
  } catch {
    throw new ApiError("The server cannot be reached.", "NETWORK");
  }
}

// A job started on the session from the frame; bounds: {direction, endFrameIndex} (both
// optional: the whole video, both ways).
export async function startJob(sessionId, startFrameIndex, bounds = {}) {
  const body = {
    start_frame_index: startFrameIndex,
    direction: bounds.direction ?? "both",
    end_frame_index: bounds.endFrameIndex ?? null,
  };
  const response = await send(`/sessions/${encodeURIComponent(sessionId)}/propagation`, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(body),
  });
  if (!response.ok) throw await refusal(response);
  return (await response.json()).job;
}

// The browser's jobs, newest first: the running ones and the latest ended.
export async function listJobs() {
  const response = await send("/propagations");
  if (!response.ok) throw await refusal(response);
  return (await response.json()).jobs;
}

// The browser's job running on the video, if one does.
export async function runningJob(videoPath) {
  return (await listJobs()).find((job) => job.video === videoPath && job.status === "running") ?? null;
}

export async function cancelJob(jobId) {
  const response = await send(`/propagations/${encodeURIComponent(jobId)}/cancel`, { method: "POST" });
  if (!response.ok) throw await refusal(response);
  return (await response.json()).job;
}

// The frames the job stored after its `from`th and up to its `to`th, as at most two inclusive
// [first, last] ranges: as the server's job_legs orders them, forward from the start to its
// reach, then backward from the frame before the start (or the start, going backward only).
export function framesStored(job, frameCount, from, to) {
  const start = job.start_frame_index;
  const end = job.end_frame_index;
  const reach = end === null ? frameCount : Math.abs(end - start);
  const last = Math.min(start + reach, frameCount - 1);
  const first = Math.max(start - reach, 0);
  const forward = job.direction === "backward" ? 0 : last - start + 1;
  const backFrom = job.direction === "both" ? start - 1 : start;
  const backward = job.direction === "forward" ? 0 : Math.max(backFrom - first + 1, 0);
  const ranges = [];
  const a = Math.min(from, forward);
  const b = Math.min(to, forward);
  if (b > a) ranges.push([start + a, start + b - 1]);
  const c = Math.min(Math.max(from - forward, 0), backward);
  const d = Math.min(Math.max(to - forward, 0), backward);
  if (d > c) ranges.push([backFrom - d + 1, backFrom - c]);
  return ranges;
}
