// The GraphQL API, as any client uses it: JSON POSTs, and file uploads by the GraphQL multipart
// request specification (through XMLHttpRequest, whose upload reports progress). Its errors'
// messages count frames as the page does (frame_numbers.js).

import { pageFrames } from "./frame_numbers.js";

const ENDPOINT = "/graphql";

export class ApiError extends Error {
  constructor(message, code) {
    super(message);
    this.code = code;
  }
}

export async function graphql(query, variables = {}, { keepalive = false } = {}) {
  let response;
  try {
    response = await fetch(ENDPOINT, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ query, variables }),
      keepalive,
    });
  } catch {
    throw new ApiError("The server cannot be reached.", "NETWORK");
  }
  return answer(response.status, await response.text());
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
        resolve(answer(request.status, request.responseText));
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

function answer(status, text) {
  let body;
  try {
    body = JSON.parse(text);
  } catch {
    throw new ApiError(`The server answered ${status} without a GraphQL result.`, "HTTP");
  }
  if (body.errors?.length) {
    const [first] = body.errors;
    throw new ApiError(pageFrames(first.message), first.extensions?.code ?? "GRAPHQL");
  }
  return body.data;
}
