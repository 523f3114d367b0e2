// The admin JSON API as the admin page calls it: the CSRF token sent, a plain-text error
// answer thrown as the error's message, and a server that cannot be reached told apart.

export class Unreachable extends Error {}

function csrfToken() {
  const match = document.cookie.match(/(?:^|; )csrftoken=([^;]+)/);
  return match ? decodeURIComponent(match[1]) : "";
}

export async function api(path, options = {}) {
  let response;
  try {
    response = await fetch(path, {
      ...options,
      headers: { "Content-Type": "application/json", "X-CSRFToken": csrfToken() },
      credentials: "same-origin",
    });
  } catch (error) {
    console.warn(`admin: ${path}:`, error);
    throw new Unreachable("The server cannot be reached.");
  }
  const body = await response.text();
  if (!response.ok) throw new Error(body || `HTTP ${response.status}`);
  return JSON.parse(body);
}
