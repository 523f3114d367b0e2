// The viewer page: plays /ts with mpegts.js and shows the status the server pushes.
//
// The server ends /ts when the channel changes; the player is then rebuilt at once (after an
// error, a second later), so the page follows the channel without a reload. Within a channel the
// stream changes too, without ending (the RECONNECTING slate, a backup, the source back, a
// source's new codec or picture size): mpegts.js cannot follow such a change in the same player
// (a Main-profile slate, then a Baseline source, froze it for good), so the status feed tells
// of each (`stream_serial`) and the page starts a new player for it. A browser without Media
// Source Extensions (Safari on iOS) cannot run mpegts.js but plays HLS itself: it gets the same
// channel as /hls/live.m3u8, whose discontinuities carry it across every change.
//
// One sentence under the player always says what is happening, in words a viewer reads: the
// player's own errors go to the console, as their detail means nothing to a viewer.

import { showState } from "./state.js";

const REBUILD_DELAY_MS = 1000;
const REFUSED_RETRY_MS = 10000; // channels_admin/streaming/admission.py's RETRY_AFTER_SEC
const REFRESH_EVERY_MS = 60 * 60 * 1000; // playlist details (name, logo) once an hour
const FEED_RETRY_MIN_MS = 500;
const FEED_RETRY_MAX_MS = 10000;
// A feed open this long was no refusal: after it, the waits start again from the shortest.
const FEED_LASTED_MS = 10000;
// A live player shows several frames a second (timeupdate comes 4 times a second); longer
// than this without one and the badge stops saying "live".
const PICTURE_STALE_MS = 3000;
const CHECK_EVERY_MS = 1000;
// A return to the channel before (the one chosen showed no picture) is told while it is under
// way and this long after.
const RETURN_TOLD_MS = 15000;

const video = document.getElementById("player");
const message = document.getElementById("message");
let player = null; // an mpegts.js player, or "hls" while the browser plays the HLS output
let builtFor = null; // the stream (status.stream_serial) the player was built for
let letGo = []; // mpegts.js players no longer used, to be destroyed in a task of their own
let rebuildTimer = null;
let status = null; // the latest status the feed pushed
// "connecting" at first, then "open" or "closed": once closed, `status` may be long untrue.
let feed = "connecting";
let refused = false; // the server refused this viewer (it carries all it can)
let lastFrameAt = 0;
let lastTime = -1;
let shownSentence = null;
// When the page learned of the current return (performance.now()); -Infinity: after it was over.
let returnSince = null;

function showStatus(pushed) {
  const before = status;
  status = pushed;
  if (!status.switch_returned) {
    returnSince = null;
  } else if (returnSince === null) {
    // told to a page that saw it happen, not to one opened later
    const seen = status.transitioning || (before && !before.switch_returned);
    returnSince = seen ? performance.now() : -Infinity;
  }
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
  if (status.live && player && player !== "hls" && status.stream_serial !== builtFor) {
    scheduleRebuild(`the stream changed to ${status.stream_format || "a format not known"}`, 0);
  } else if (status.live && !player && !rebuildTimer) {
    buildPlayer();
  }
  render();
}

function pictureShown() {
  // A paused player still shows its frame; a playing one must move on.
  if (video.paused) return video.readyState >= 2;
  return performance.now() - lastFrameAt < PICTURE_STALE_MS;
}

// The sentence for now, as [text] or [text, link text, href, text after].
function sentence() {
  if (feed === "closed") return ["The server cannot be reached; trying again…"];
  if (!status) return ["Connecting to the server…"];
  if (!status.live) {
    const picks = "No channel is on yet. An administrator picks one on the ";
    return [picks, "channel page", "/tv/admin/", "."];
  }
  // where the hub went back to, and why: "X did not answer (connection refused): back on Y"
  if (status.switch_returned && (status.transitioning || returnTold())) {
    return [status.switch_message];
  }
  if (status.transitioning) {
    // a channel that has not started since the switch never stopped
    return status.upstream_down
      ? [`${status.channel_name} has not answered yet; still trying…`]
      : [`Switching to ${status.channel_name}…`];
  }
  if (status.reconnecting || status.upstream_down) {
    return ["The channel's source stopped; reconnecting…"];
  }
  if (refused) return ["This server carries all the viewers it can; trying again in 10 s…"];
  if (!pictureShown()) return [`Tuning in to ${status.channel_name}…`];
  return [""];
}

function returnTold() {
  return performance.now() - returnSince < RETURN_TOLD_MS;
}

function render() {
  const connected = feed !== "closed";
  showState(document.getElementById("state"), status, { connected, picture: pictureShown() });
  const [before, linkText, href, after] = sentence();
  const key = [before, linkText, href, after].join("\n");
  if (key === shownSentence) return; // rebuilt only on a change: a link must stay clickable
  shownSentence = key;
  if (!linkText) {
    message.textContent = before;
    return;
  }
  const link = document.createElement("a");
  link.href = href;
  link.textContent = linkText;
  message.replaceChildren(before, link, after);
}

video.addEventListener("timeupdate", () => {
  if (video.readyState >= 2 && video.currentTime !== lastTime) {
    lastTime = video.currentTime;
    lastFrameAt = performance.now();
  }
  render();
});
setInterval(render, CHECK_EVERY_MS);

// mpegts.js goes on using a player after calling its listeners, so a player destroyed in one of
// them throws ("Cannot read properties of null (reading 'emit')"). A player is let go of at
// once (its listeners then ignore it), and destroyed in a task of its own, always before the
// next one takes the video element (its detaching empties the element's source).
function letPlayerGo() {
  if (player === "hls") {
    video.removeAttribute("src");
    video.load();
  } else if (player) {
    letGo.push(player);
    setTimeout(destroyLetGo, 0);
  }
  player = null;
}

function destroyLetGo() {
  for (const old of letGo.splice(0)) {
    try {
      // this order frees its connection, its MediaSource and their SourceBuffers
      old.pause();
      old.unload();
      old.detachMediaElement();
      old.destroy();
    } catch (error) {
      console.warn("viewer: destroying a player failed:", error);
    }
  }
}

function playNativeHls() {
  letPlayerGo();
  player = "hls";
  video.src = new URL("/hls/live.m3u8", location.href).href;
  const playing = video.play();
  if (playing) playing.catch(() => {}); // autoplay may wait for a click
}

video.addEventListener("error", () => {
  // The HLS output is not ready yet (503), or this browser cannot play HLS either.
  if (player === "hls") scheduleRebuild(`HLS failed: ${video.error?.message || video.error?.code}`);
});

function scheduleRebuild(reason, delayMs = REBUILD_DELAY_MS) {
  console.info(`viewer: rebuilding the player: ${reason}`);
  letPlayerGo();
  clearTimeout(rebuildTimer);
  rebuildTimer = setTimeout(() => {
    rebuildTimer = null;
    // Without the feed the server is likely gone: the player waits for the feed to return.
    if (feed === "open" && status?.live) buildPlayer();
  }, delayMs);
}

function buildPlayer() {
  refused = false;
  if (!window.mpegts || !mpegts.getFeatureList().mseLivePlayback) {
    playNativeHls();
    return;
  }
  letPlayerGo();
  destroyLetGo();
  const built = mpegts.createPlayer(
    { type: "mpegts", isLive: true, url: new URL("/ts", location.href).href },
    { enableStashBuffer: false, liveBufferLatencyChasing: true },
  );
  player = built;
  builtFor = status?.stream_serial ?? null;
  built.attachMediaElement(video);
  built.on(mpegts.Events.ERROR, (type, detail, info) => {
    if (built !== player) return; // a player let go of
    if (info && info.code === 503) {
      // Refused (no channel yet, or this server carries all the viewers it can): its
      // Retry-After, which mpegts.js does not pass on, is this long.
      refused = true;
      scheduleRebuild("refused (503)", REFUSED_RETRY_MS);
      render();
    } else {
      console.warn("viewer: the player failed:", type, detail, info);
      scheduleRebuild(`${type}: ${detail}`);
    }
  });
  // The server ended the stream: a switch, whose new channel is ready to be asked for now.
  built.on(mpegts.Events.LOADING_COMPLETE, () => {
    if (built === player) scheduleRebuild("the channel changed", 0);
  });
  built.load();
  const playing = video.play();
  if (playing) playing.catch(() => {}); // autoplay may wait for a click
}

function connectFeed(retryMs = FEED_RETRY_MIN_MS) {
  const scheme = location.protocol === "https:" ? "wss:" : "ws:";
  const socket = new WebSocket(`${scheme}//${location.host}/ws/tv/status`);
  let refresh = null;
  let openedAt = null;
  socket.addEventListener("open", () => {
    openedAt = performance.now();
    feed = "open";
    refresh = setInterval(() => socket.send(JSON.stringify({ type: "refresh" })), REFRESH_EVERY_MS);
  });
  socket.addEventListener("message", (event) => showStatus(JSON.parse(event.data)));
  socket.addEventListener("close", () => {
    clearInterval(refresh);
    feed = "closed";
    render();
    // Refused (the server answers 429 to an address with too many connections, and the socket
    // closes before it opens: edge/websocket_admission.py) or closed soon after it opened,
    // the page waits twice as long each time, up to FEED_RETRY_MAX_MS. Each wait is between
    // half and all of that, so that pages refused together do not all come back together.
    if (openedAt !== null && performance.now() - openedAt >= FEED_LASTED_MS) {
      retryMs = FEED_RETRY_MIN_MS;
    }
    const wait = retryMs * (0.5 + Math.random() / 2);
    setTimeout(() => connectFeed(Math.min(retryMs * 2, FEED_RETRY_MAX_MS)), wait);
  });
}

render();
connectFeed();
