// The channel admin page, built on the admin JSON API (the same API any script can use).
//
// After a switch, the message under the toolbar follows the switch's own sentence in the
// status ("Switching to X…", then how it went), polled twice a second until the outcome;
// the status line says which source plays, the failovers and the last failure.
//
// The private viewing panel turns the stream private or open, makes viewer links (showing the
// new link's URL once: only its hash is kept) and revokes them; the status's `links` give each
// link's viewers on every poll.

import { api, Unreachable } from "./api.js";
import { nextWords, nowAndNext, nowWords, progressAt } from "./guide.js";
import { showState } from "./state.js";

const SEARCH_DELAY_MS = 200;
const STATUS_EVERY_MS = 2000;
const SWITCHING_STATUS_EVERY_MS = 500; // while a switch is under way: its outcome soon after
const UNREACHABLE = "The server cannot be reached; trying again…";
const SHOWN_MAX = 500; // rows drawn at once; the search narrows a 100,000-channel list

const rows = document.getElementById("channels");
const message = document.getElementById("message");
let current = null;
let searchTimer = null;
// Whether the message shows the last switch's sentence (until the page says something else),
// and whether it says that the status cannot be read (until it can again).
let followingSwitch = true;
let statusFailed = false;
let guideVersion; // the guide the rows show (its version), once the status said

function show(text, isError = false) {
  message.textContent = text;
  message.className = isError ? "message error" : "message muted";
}

// What the page did or failed to do: said in place of the switch's sentence, which the message
// no longer follows.
function say(text, isError = false) {
  followingSwitch = false;
  statusFailed = false;
  show(text, isError);
}

async function loadGroups() {
  const select = document.getElementById("group");
  const chosen = select.value;
  select.replaceChildren(new Option("All groups", ""));
  for (const group of await api("/api/admin/groups")) {
    select.add(new Option(`${group.name} (${group.channels})`, group.name));
  }
  select.value = chosen;
}

async function loadChannels() {
  const query = new URLSearchParams({
    search: document.getElementById("search").value,
    group: document.getElementById("group").value,
  });
  const channels = await api(`/api/admin/channels?${query}`);
  const counted = `${channels.length} channel${channels.length === 1 ? "" : "s"}`;
  document.getElementById("count").textContent =
    channels.length > SHOWN_MAX ? `${counted} (first ${SHOWN_MAX} shown)` : counted;
  rows.replaceChildren(...channels.slice(0, SHOWN_MAX).map(channelRow));
}

function channelRow(channel) {
  const row = document.createElement("tr");
  row.dataset.url = channel.stream_url;
  row.classList.toggle("active", channel.stream_url === current?.current_stream_url);
  const logo = document.createElement("img");
  logo.alt = "";
  logo.loading = "lazy";
  if (channel.logo) logo.src = channel.logo;
  const play = document.createElement("button");
  play.type = "button";
  play.textContent = "Play";
  play.className = "primary";
  play.addEventListener("click", () => select(channel));
  const cells = [logo, channel.name, channel.id, channel.group, guideCell(channel), play].map((content) => {
    const cell = document.createElement("td");
    cell.append(content);
    return cell;
  });
  row.append(...cells);
  return row;
}

// The programme on now (times, title, a bar of its progress) and the next, or nothing.
function guideCell(channel) {
  const cell = document.createElement("div");
  cell.className = "guide-cell";
  const { now, next } = nowAndNext(channel);
  if (now) {
    const title = document.createElement("div");
    title.className = "guide-now";
    title.textContent = nowWords(now);
    const bar = document.createElement("progress");
    bar.max = 1;
    bar.value = progressAt(now);
    cell.append(title, bar);
  }
  if (next) {
    const after = document.createElement("div");
    after.className = "guide-next muted";
    after.textContent = nextWords(next);
    cell.append(after);
  }
  return cell;
}

// How the guide is: what it holds and when it was refreshed, and why the last refresh failed
// (the last good guide is shown meanwhile).
function guideWords(guide) {
  if (!guide) return "";
  const held = guide.version
    ? `Guide: ${plural(guide.programmes, "programme")} of ${plural(guide.channels, "channel")}, ` +
      `refreshed ${clock(guide.refreshed_at)}`
    : "Guide: none yet";
  const leftOut = guide.left_out ? ` (${guide.left_out} over the bounds left out)` : "";
  const failed = guide.last_error
    ? ` · the refresh at ${clock(guide.last_error_at)} failed: ${guide.last_error}` +
      (guide.version ? " (the last good guide is kept)" : "")
    : "";
  return held + leftOut + failed;
}

async function select(channel) {
  let answer;
  try {
    answer = await api("/api/admin/channel", {
      method: "POST",
      body: JSON.stringify({ channel_id: channel.id }),
    });
  } catch (error) {
    say(error.message, true);
    return;
  }
  show(`Switching to ${answer.channel}…`);
  followingSwitch = true;
  try {
    await refreshStatus();
  } catch {
    return; // said on the page; the switch's sentence follows once the status answers
  }
  await loadChannels().catch((error) => say(error.message, true));
}

function linkRow(link) {
  const row = document.createElement("tr");
  row.dataset.link = link.id;
  const state = link.revoked_at ? "revoked" : link.active ? "active" : "expired";
  const revoke = document.createElement("button");
  revoke.type = "button";
  revoke.textContent = "Revoke";
  revoke.disabled = Boolean(link.revoked_at);
  revoke.addEventListener("click", () => revokeLink(link));
  const cells = [
    link.name,
    link.expires_at ? new Date(link.expires_at).toLocaleString() : "never",
    link.max_viewers ?? "no cap",
    String(link.viewers),
    state,
    revoke,
  ].map((content) => {
    const cell = document.createElement("td");
    cell.append(content);
    return cell;
  });
  cells[3].className = "link-viewers";
  cells[4].className = "link-state";
  row.append(...cells);
  return row;
}

function showLinks(status) {
  document.getElementById("private").checked = status.private;
  document.getElementById("links").replaceChildren(...status.links.map(linkRow));
}

async function revokeLink(link) {
  try {
    await api(`/api/admin/links/${link.id}/revoke`, { method: "POST" });
    say(`Link "${link.name}" revoked: its viewers are cut off.`);
    await refreshStatus();
  } catch (error) {
    say(error.message, true);
  }
}

document.getElementById("private").addEventListener("change", async (event) => {
  const private_ = event.target.checked;
  try {
    await api("/api/admin/private", { method: "POST", body: JSON.stringify({ private: private_ }) });
    say(private_ ? "The stream is private: viewers need a link." : "The stream is open to all.");
    await refreshStatus();
  } catch (error) {
    event.target.checked = !private_;
    say(error.message, true);
  }
});

document.getElementById("link-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const expires = document.getElementById("link-expires").value;
  const cap = document.getElementById("link-cap").value;
  try {
    const made = await api("/api/admin/links", {
      method: "POST",
      body: JSON.stringify({
        name: document.getElementById("link-name").value,
        expires_at: expires ? new Date(expires).toISOString() : null,
        max_viewers: cap ? Number(cap) : null,
      }),
    });
    document.getElementById("link-url").value = made.url;
    document.getElementById("link-made").hidden = false;
    document.getElementById("link-form").reset();
    await refreshStatus();
  } catch (error) {
    say(error.message, true);
  }
});

function plural(count, noun) {
  return `${count} ${noun}${count === 1 ? "" : "s"}`;
}

// Which of the channel's sources plays; nothing for a channel of one source, as there is no
// choice to tell of.
function sourceWords(status) {
  if (status.sources < 2 || status.transitioning) return "";
  if (!status.source) return `none of ${status.sources} sources plays`;
  return status.source === "primary" ? `primary of ${status.sources} sources` : status.source;
}

function clock(isoTime) {
  const at = new Date(isoTime);
  return [at.getHours(), at.getMinutes(), at.getSeconds()]
    .map((part) => String(part).padStart(2, "0"))
    .join(":");
}

function failureWords(failure) {
  return failure ? `${failure.source} failed ${clock(failure.at)}: ${failure.reason}` : "";
}

async function refreshStatus() {
  try {
    current = await api("/api/admin/status");
  } catch (error) {
    const reached = !(error instanceof Unreachable);
    showState(document.getElementById("state"), current, { connected: reached });
    // (a switch's outcome, if followed, is still told once the status answers)
    show(reached ? `The status cannot be read: ${error.message}` : UNREACHABLE, true);
    statusFailed = true;
    throw error;
  }
  if (statusFailed) {
    statusFailed = false;
    show("");
  }
  if (followingSwitch && current.switch_message) show(current.switch_message);
  document.getElementById("channel-name").textContent = current.channel_name || "No channel";
  document.getElementById("status-details").textContent = [
    `playlist version ${current.playlist_version}`,
    plural(current.viewers, "viewer"),
    current.refusing_viewers ? "refusing new viewers" : "",
    current.viewers_refused ? `${current.viewers_refused} refused` : "",
    current.viewers_shed ? `${current.viewers_shed} cut off` : "",
    sourceWords(current),
    current.failovers ? plural(current.failovers, "failover") : "",
    failureWords(current.last_failure),
    current.upstream_down ? current.upstream_detail : current.upstream_info,
  ]
    .filter(Boolean)
    .join(" · ");
  showState(document.getElementById("state"), current);
  const guideState = document.getElementById("guide-state");
  guideState.textContent = guideWords(current.guide);
  guideState.className = current.guide?.last_error ? "message error" : "muted";
  if (current.guide?.version !== guideVersion) {
    // a refresh brought another guide: the rows' now and next are drawn again
    const first = guideVersion === undefined;
    guideVersion = current.guide?.version;
    if (!first) loadChannels().catch((error) => say(error.message, true));
  }
  showLinks(current);
  for (const row of rows.children) {
    row.classList.toggle("active", row.dataset.url === current.current_stream_url);
  }
}

document.getElementById("filters").addEventListener("submit", (event) => event.preventDefault());
document.getElementById("search").addEventListener("input", () => {
  clearTimeout(searchTimer);
  searchTimer = setTimeout(() => loadChannels().catch((e) => say(e.message, true)), SEARCH_DELAY_MS);
});
document.getElementById("group").addEventListener("change", () => loadChannels().catch((e) => say(e.message, true)));
document.getElementById("reload").addEventListener("click", async (event) => {
  event.target.disabled = true;
  say("Reloading the playlist…");
  try {
    const answer = await api("/api/admin/playlist/reload", { method: "POST" });
    say(`Playlist reloaded: ${answer.channels} channels.`);
    await Promise.all([loadGroups(), loadChannels(), refreshStatus()]);
  } catch (error) {
    say(error.message, true);
  } finally {
    event.target.disabled = false;
  }
});

document.getElementById("guide-refresh").addEventListener("click", async (event) => {
  event.target.disabled = true;
  say("Refreshing the guide…");
  try {
    const answer = await api("/api/admin/guide/refresh", { method: "POST" });
    say(`Guide refreshed: ${plural(answer.programmes, "programme")} of ${plural(answer.channels, "channel")}.`);
    await refreshStatus();
  } catch (error) {
    say(error.message, true);
    await refreshStatus().catch(() => {});
  } finally {
    event.target.disabled = false;
  }
});

async function pollStatus() {
  try {
    await refreshStatus();
  } catch {
    // said on the page
  }
  const switching = current?.transitioning && followingSwitch && !statusFailed;
  setTimeout(pollStatus, switching ? SWITCHING_STATUS_EVERY_MS : STATUS_EVERY_MS);
}

refreshStatus()
  .then(() => Promise.all([loadGroups(), loadChannels()]))
  .catch((error) => statusFailed || say(error.message, true))
  .finally(() => setTimeout(pollStatus, STATUS_EVERY_MS));
