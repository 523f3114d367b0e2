// The viewer page: plays /ts with mpegts.js and shows the status the server pushes.
//
// The server ends /ts when the channel changes; the player is then rebuilt at once (after an
// error, a second later), so the page follows the channel without a reload. A browser without
// Media Source Extensions (Safari on iOS) cannot run mpegts.js but plays HLS itself: it gets
// the same channel as /hls/live.m3u8, whose discontinuities carry it across a switch.

import { showState } from "./state.js";

const REBUILD_DELAY_MS = 1000;
const REFUSED_RETRY_MS = 10000; // channels_admin/streaming/admission.py's RETRY_AFTER_SEC
const REFRESH_EVERY_MS = 60 * 60 * 1000; // playlist details (name, logo) once an hour
const FEED_RETRY_MAX_MS = 10000;

const video = document.getElementById("player");
const message = document.getElementById("message");
let player = null; // an mpegts.js player, or "hls" while the browser plays the HLS output
let rebuildTimer = null;
let live = false;

function showStatus(status) {
  live = status.live;
  document.getElementById("channel-name").textContent = status.channel_name || "No channel";
  const details = [
    status.channel_number && `#${status.channel_number}`,
    status.channel_group,
    !status.upstream_down && status.upstream_info,
  ]
    .filter(Boolean)
    .join(" · ");
  document.getElementById("channel-details").textContent = details;
  const logo = document.getElementById("channel-logo");
  logo.hidden = !status.channel_logo;
  if (status.channel_logo) logo.src = status.channel_logo;
  showState(document.getElementById("state"), status);
  if (status.live && !player && !rebuildTimer) buildPlayer();
}

function destroyPlayer() {
  if (!player) return;
  if (player === "hls") {
    video.removeAttribute("src");
    video.load();
  } else {
    player.destroy();
  }
  player = null;
}

function playNativeHls() {
  destroyPlayer();
  message.textContent = "";
  player = "hls";
  video.src = new URL("/hls/live.m3u8", location.href).href;
  const playing = video.play();
  if (playing) playing.catch(() => {}); // autoplay may wait for a click
}

video.addEventListener("error", () => {
  // The HLS output is not ready yet (503), or this browser cannot play HLS either.
  if (player === "hls") scheduleRebuild("Reconnecting…");
});

function scheduleRebuild(reason, delayMs = REBUILD_DELAY_MS) {
  destroyPlayer();
  if (rebuildTimer) return;
  message.textContent = reason;
  rebuildTimer = setTimeout(() => {
    rebuildTimer = null;
    if (live) buildPlayer();
  }, delayMs);
}

function buildPlayer() {
  if (!window.mpegts || !mpegts.getFeatureList().mseLivePlayback) {
    playNativeHls();
    return;
  }
  destroyPlayer();
  message.textContent = "";
  player = mpegts.createPlayer(
    { type: "mpegts", isLive: true, url: new URL("/ts", location.href).href },
    { enableStashBuffer: false, liveBufferLatencyChasing: true },
  );
  player.attachMediaElement(video);
  player.on(mpegts.Events.ERROR, (type, detail, info) => {
    if (info && info.code === 503) {
      // Refused (no channel yet, or this server carries all the viewers it can): its
      // Retry-After, which mpegts.js does not pass on, is this long.
      scheduleRebuild("This server carries all the viewers it can; trying again in 10 s…", REFUSED_RETRY_MS);
    } else {
      scheduleRebuild(`Reconnecting (${detail})…`);
    }
  });
  // Another source with another picture size (a failover, the slate): Chromium takes seconds
  // to show it in the same player, while a new one starts at once from its key frame.
  let size = null;
  player.on(mpegts.Events.MEDIA_INFO, (info) => {
    const next = info.hasVideo ? `${info.width}x${info.height}` : null;
    if (size && next && next !== size) scheduleRebuild("", 0);
    size = next || size;
  });
  // The server ended the stream: a switch, whose new channel is ready to be asked for now.
  player.on(mpegts.Events.LOADING_COMPLETE, () => scheduleRebuild("The channel changed…", 0));
  player.load();
  const playing = video.play();
  if (playing) playing.catch(() => {}); // autoplay may wait for a click
}

function connectFeed(retryMs = 500) {
  const scheme = location.protocol === "https:" ? "wss:" : "ws:";
  const feed = new WebSocket(`${scheme}//${location.host}/ws/tv/status`);
  let refresh = null;
  feed.addEventListener("open", () => {
    retryMs = 500;
    refresh = setInterval(() => feed.send(JSON.stringify({ type: "refresh" })), REFRESH_EVERY_MS);
  });
  feed.addEventListener("message", (event) => showStatus(JSON.parse(event.data)));
  feed.addEventListener("close", () => {
    clearInterval(refresh);
    setTimeout(() => connectFeed(Math.min(retryMs * 2, FEED_RETRY_MAX_MS)), retryMs);
  });
}

connectFeed();
