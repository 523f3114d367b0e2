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
// A private stream's page carries its viewer link's token (`/tv/?t=TOKEN`) and passes it on to
// /ts, the HLS playlist and the status feed. A link revoked (or expired) while it plays ends the
// stream and closes the feed (code 4403), and the page says so under the player, off air, with
// no retry (as it does for a request's 403); a link watched by its most viewers (429) is tried
// again after 10 s.
//
// One sentence under the player always says what is happening, in words a viewer reads: the
// player's own errors go to the console, as their detail means nothing to a viewer.
//
// Over the picture, an overlay tells what is on: the channel's logo and name, the programme on
// now (its times, title and a bar of its progress) and the next, from the guide. It shows when
// the channel changes and fades after a few seconds; the "i" key or a click on the picture
// shows it again.

import { nextWords, nowAndNext, nowWords, progressAt } from "./guide.js";
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

const LINK_FULL_RETRY_MS = 10000; // services/viewers.py's LINK_FULL_RETRY_AFTER_SEC
// The status feed's close when its link no longer admits viewers (consumers.py's
// LINK_LOST_CLOSE): revoked or expired, or the stream made private.
const LINK_LOST_CLOSE = 4403;
const LINK_LOST = "This link no longer opens the stream: it was revoked or has expired.";
const TOKEN = new URLSearchParams(location.search).get("t");
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
let linkRefused = null; // why this page's link no longer admits it (no retry), or null
let linkFull = false; // its link is watched by as many viewers as it allows
let lastFrameAt = 0;
let lastTime = -1;
let shownSentence = null;
// When the page learned of the current return (performance.now()); -Infinity: after it was over.
let returnSince = null;
let overlayTimer = null;
let overlayChannel = null; // the channel the overlay last showed itself for
let guideAsked = null; // the programme whose end had the page ask for the status again

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
  drawOverlay();
  if (status.channel_name && status.channel_name !== overlayChannel) {
    overlayChannel = status.channel_name;
    showOverlay();
  }
  if (status.live && player && player !== "hls" && status.stream_serial !== builtFor) {
    scheduleRebuild(`the stream changed to ${status.stream_format || "a format not known"}`, 0);
  } else if (status.live && !player && !rebuildTimer && !linkRefused) {
    buildPlayer();
  }
  render();
}

// The overlay's content, from the latest status and the time now.
function drawOverlay() {
  const { now, next } = nowAndNext(status);
  const logo = document.getElementById("overlay-logo");
  logo.hidden = !status?.channel_logo;
  if (status?.channel_logo && logo.getAttribute("src") !== status.channel_logo) {
    logo.src = status.channel_logo;
  }
  document.getElementById("overlay-channel").textContent = status?.channel_name || "No channel";
  document.getElementById("overlay-now").textContent = now ? nowWords(now) : "";
  const bar = document.getElementById("overlay-progress");
  bar.hidden = !now;
  if (now) bar.value = progressAt(now);
  document.getElementById("overlay-next").textContent = nextWords(next);
  // The programme on now has ended: the page asks for the status again (once per programme),
  // which brings the one after the next.
  const ended = status?.now && Date.parse(status.now.stop) <= Date.now() ? status.now.stop : null;
  if (ended && ended !== guideAsked && feed === "open") {
    guideAsked = ended;
    askStatus();
  }
}

function showOverlay() {
  const overlay = document.getElementById("overlay");
  overlay.classList.add("shown");
  clearTimeout(overlayTimer);
  // CHANNELS_OVERLAY_SEC, which the page carries
  const shownMs = Number(overlay.dataset.shownMs);
  overlayTimer = setTimeout(() => overlay.classList.remove("shown"), shownMs);
}

document.addEventListener("keydown", (event) => {
  if (event.key === "i" && !event.ctrlKey && !event.metaKey && !event.altKey) showOverlay();
});
video.addEventListener("click", showOverlay);

function pictureShown() {
  // A paused player still shows its frame; a playing one must move on.
  if (video.paused) return video.readyState >= 2;
  return performance.now() - lastFrameAt < PICTURE_STALE_MS;
}

// The sentence for now, as [text] or [text, link text, href, text after].
function sentence() {
  if (linkRefused) return [linkRefused];
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
  if (linkFull) return ["This link is watched by as many viewers as it allows; trying again in 10 s…"];
  if (!pictureShown()) return [`Tuning in to ${status.channel_name}…`];
  return [""];
}

function returnTold() {
  return performance.now() - returnSince < RETURN_TOLD_MS;
}

function render() {
  // a page whose link no longer opens the stream shows nothing of it: off air (its feed,
  // which the server closed for that, is no lost connection)
  const connected = Boolean(linkRefused) || feed !== "closed";
  const shown = linkRefused ? null : status;
  showState(document.getElementById("state"), shown, { connected, picture: pictureShown() });
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
setInterval(() => status && drawOverlay(), CHECK_EVERY_MS);

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

// The server's path with this page's link on it, if it has one.
function withToken(path) {
  const url = new URL(path, location.href);
  if (TOKEN) url.searchParams.set("t", TOKEN);
  return url.href;
}

function playNativeHls() {
  letPlayerGo();
  player = "hls";
  video.src = withToken("/hls/live.m3u8");
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
    if (feed === "open" && status?.live && !linkRefused) buildPlayer();
  }, delayMs);
}

function buildPlayer() {
  refused = false;
  linkFull = false;
  if (!window.mpegts || !mpegts.getFeatureList().mseLivePlayback) {
    playNativeHls();
    return;
  }
  letPlayerGo();
  destroyLetGo();
  const built = mpegts.createPlayer(
    { type: "mpegts", isLive: true, url: withToken("/ts") },
    { enableStashBuffer: false, liveBufferLatencyChasing: true },
  );
  player = built;
  builtFor = status?.stream_serial ?? null;
  built.attachMediaElement(video);
  built.on(mpegts.Events.ERROR, (type, detail, info) => {
    if (built !== player) return; // a player let go of
    if (info && (info.code === 401 || info.code === 403)) {
      // The link was revoked or has expired (or the stream became private): asking again
      // will not help.
      linkRefused = LINK_LOST;
      letPlayerGo();
      render();
    } else if (info && info.code === 429) {
      linkFull = true;
      scheduleRebuild("the link is full (429)", LINK_FULL_RETRY_MS);
      render();
    } else if (info && info.code === 503) {
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

let askStatus = () => {}; // asks the open feed for the status again

function connectFeed(retryMs = FEED_RETRY_MIN_MS) {
  const scheme = location.protocol === "https:" ? "wss:" : "ws:";
  const feedUrl = new URL(`${scheme}//${location.host}/ws/tv/status`);
  if (TOKEN) feedUrl.searchParams.set("t", TOKEN);
  const socket = new WebSocket(feedUrl.href);
  askStatus = () => socket.send(JSON.stringify({ type: "refresh" }));
  let refresh = null;
  let openedAt = null;
  socket.addEventListener("open", () => {
    openedAt = performance.now();
    feed = "open";
    refresh = setInterval(() => socket.send(JSON.stringify({ type: "refresh" })), REFRESH_EVERY_MS);
  });
  socket.addEventListener("message", (event) => showStatus(JSON.parse(event.data)));
  socket.addEventListener("close", (event) => {
    clearInterval(refresh);
    feed = "closed";
    if (event.code === LINK_LOST_CLOSE) {
      // asking again would be refused: the page stops, and says why
      linkRefused = LINK_LOST;
      letPlayerGo();
      render();
      return;
    }
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
