// The GraphQL API, as any client uses it: JSON POSTs, and file uploads by the GraphQL multipart
// request specification (through XMLHttpRequest, whose upload reports progress). Its errors'
// messages count frames as the page does (frame_numbers.js).

import { pageFrames } from "./frame_numbers.js";

const ENDPOINT = "/graphql";

// retryAfter: the seconds the server asked the client to wait before it sends again, if it did.
export class ApiError extends Error {
  constructor(message, code, retryAfter = null) {
    super(message);
    this.code = code;
    this.retryAfter = retryAfter;
  }
}

function seconds(value) {
  const number = Number(value);
  return value != null && number > 0 ? number : null;
}

// A plain endpoint's refusal ({"error", "code"} and maybe Retry-After) as an ApiError; `what`
// words the message (the server's own, its frames counted as the page counts them).
export async function refusal(response, what = (error) => error) {
  const body = await response.json().catch(() => ({}));
  const error = pageFrames(body.error) ?? `the server answered ${response.status}`;
  return new ApiError(what(error), body.code ?? "HTTP", seconds(response.headers.get("Retry-After")));
}

export async function graphql(query, variables = {}, { keepalive = false } = {}) {
  let response;
  try {
    response = await fetch(ENDPOINT, {
      method: "POST",
      // the session this page starts keeps its work, and starts with what was kept before
      headers: { "Content-Type": "application/json", "X-Keep-Work": "1" },
      body: JSON.stringify({ query, variables }),
      keepalive,
    });
  } catch {
    throw new ApiError("The server cannot be reached.", "NETWORK");
  }
  return answer(response.status, await response.text(), response.headers.get("Retry-After"));
}

// Send `file` as the variable `fileVariable`; onProgress(share) as it goes out.
export function upload(query, variables, fileVariable, file, onProgress) {
  const form = new FormData();
  form.append("operations", JSON.stringify({ query, variables: { ...variables, [fileVariable]: null } }));
  form.append("map", JSON.stringify({ 0: [`variables.${fileVariable}`] }));
  form.append("0", file, file.name);
  return new Promise((resolve, reject) => {
    const request = new XMLHttpRequest();
    request.open("POST", ENDPOINT);
    request.upload.addEventListener("progress", (event) => {
      if (event.lengthComputable) onProgress(event.loaded / event.total);
    });
    request.addEventListener("load", () => {
      try {
        resolve(answer(request.status, request.responseText, request.getResponseHeader("Retry-After")));
      } catch (error) {
        reject(error);
      }
    });
    request.addEventListener("error", () =>
      reject(new ApiError("The upload failed: the connection to the server was lost.", "NETWORK")),
    );
    request.send(form);
  });
}

function answer(status, text, retryAfter) {
  let body;
  try {
    body = JSON.parse(text);
  } catch {
    throw new ApiError(`The server answered ${status} without a GraphQL result.`, "HTTP");
  }
  if (body.errors?.length) {
    const [first] = body.errors;
    const wait = seconds(first.extensions?.retryAfter ?? retryAfter);
    throw new ApiError(pageFrames(first.message), first.extensions?.code ?? "GRAPHQL", wait);
  }
  return body.data;
}
