// The channel admin page, built on the admin JSON API (the same API any script can use).

import { showState } from "./state.js";

const SEARCH_DELAY_MS = 200;
const STATUS_EVERY_MS = 2000;
const SHOWN_MAX = 500; // rows drawn at once; the search narrows a 100,000-channel list

const rows = document.getElementById("channels");
const message = document.getElementById("message");
let current = null;
let searchTimer = null;

function csrfToken() {
  const match = document.cookie.match(/(?:^|; )csrftoken=([^;]+)/);
  return match ? decodeURIComponent(match[1]) : "";
}

async function api(path, options = {}) {
  const response = await fetch(path, {
    ...options,
    headers: { "Content-Type": "application/json", "X-CSRFToken": csrfToken() },
    credentials: "same-origin",
  });
  const body = await response.text();
  if (!response.ok) throw new Error(body || `HTTP ${response.status}`);
  return JSON.parse(body);
}

function say(text, isError = false) {
  message.textContent = text;
  message.className = isError ? "message error" : "message muted";
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
  const cells = [logo, channel.name, channel.id, channel.group, play].map((content) => {
    const cell = document.createElement("td");
    cell.append(content);
    return cell;
  });
  row.append(...cells);
  return row;
}

async function select(channel) {
  try {
    const answer = await api("/api/admin/channel", {
      method: "POST",
      body: JSON.stringify({ channel_id: channel.id }),
    });
    say(`Switching to ${answer.channel}…`);
    await refreshStatus();
    await loadChannels();
  } catch (error) {
    say(error.message, true);
  }
}

async function refreshStatus() {
  current = await api("/api/admin/status");
  document.getElementById("channel-name").textContent = current.channel_name || "No channel";
  document.getElementById("status-details").textContent = [
    `playlist version ${current.playlist_version}`,
    `${current.viewers} viewer${current.viewers === 1 ? "" : "s"}`,
    current.refusing_viewers ? "refusing new viewers" : "",
    current.viewers_refused ? `${current.viewers_refused} refused` : "",
    current.viewers_shed ? `${current.viewers_shed} cut off` : "",
    current.upstream_down ? current.upstream_detail : current.upstream_info,
  ]
    .filter(Boolean)
    .join(" · ");
  showState(document.getElementById("state"), current);
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

refreshStatus()
  .then(() => Promise.all([loadGroups(), loadChannels()]))
  .catch((error) => say(error.message, true));
setInterval(() => refreshStatus().catch(() => {}), STATUS_EVERY_MS);
