// The propagation stream: POST /propagate_in_video answers with a multipart stream, one part
// per frame, each a JSON {"frame_index", "results": [{"object_id", "mask"}]} with its length
// and the frame count in the part's headers.

import { ApiError, refusal } from "./graphql.js";

const HEAD_END = [13, 10, 13, 10]; // \r\n\r\n
const text = new TextDecoder();

// Calls onFrame({frameIndex, frameTotal, results}) per part; ends when the stream does.
// bounds: {direction, endFrameIndex} (both optional: the whole video, both ways).
export async function propagate(sessionId, startFrameIndex, onFrame, signal, bounds = {}) {
  const body = { session_id: sessionId, start_frame_index: startFrameIndex };
  if (bounds.direction) body.direction = bounds.direction;
  if (bounds.endFrameIndex != null) body.end_frame_index = bounds.endFrameIndex;
  let response;
  try {
    response = await fetch("/propagate_in_video", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(body),
      signal,
    });
  } catch (error) {
    if (error.name === "AbortError") throw error;
    throw new ApiError("The server cannot be reached.", "NETWORK");
  }
  if (!response.ok) throw await refusal(response);
  const reader = response.body.getReader();
  let buffer = new Uint8Array(0);
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return;
    buffer = joined(buffer, value);
    for (let part = takePart(buffer); part; part = takePart(buffer)) {
      buffer = part.rest;
      onFrame(part.frame);
    }
  }
}

function takePart(buffer) {
  const headEnd = indexOf(buffer, HEAD_END);
  if (headEnd < 0) return null;
  const head = text.decode(buffer.subarray(0, headEnd));
  const length = header(head, "content-length");
  const bodyStart = headEnd + HEAD_END.length;
  if (buffer.length < bodyStart + length) return null;
  const body = JSON.parse(text.decode(buffer.subarray(bodyStart, bodyStart + length)));
  return {
    frame: { frameIndex: body.frame_index, frameTotal: header(head, "frame-total"), results: body.results },
    rest: buffer.subarray(bodyStart + length),
  };
}

function header(head, name) {
  const match = new RegExp(`^${name}:\\s*(\\d+)\\s*$`, "im").exec(head);
  if (!match) throw new Error(`a stream part lacks its ${name} header`);
  return Number(match[1]);
}

function indexOf(buffer, pattern) {
  outer: for (let i = 0; i + pattern.length <= buffer.length; i++) {
    for (let j = 0; j < pattern.length; j++) if (buffer[i + j] !== pattern[j]) continue outer;
    return i;
  }
  return -1;
}

function joined(a, b) {
  if (!a.length) return b;
  const both = new Uint8Array(a.length + b.length);
  both.set(a);
  both.set(b, a.length);
  return both;
}
