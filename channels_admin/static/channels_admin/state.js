// The stream's state as a badge, the same on every page.
//
// The status alone cannot say "live": a page that no longer hears from the server holds a
// status that may be long untrue, and a viewer whose player shows nothing is not watching
// anything live. So the page says what it knows besides: whether it still hears from the
// server (`connected`), and, on the viewer page, whether its player has shown a frame lately
// (`picture`).

export function showState(badge, status, { connected = true, picture = true } = {}) {
  const [label, kind] = !connected
    ? ["no connection", "offline"]
    : !status || !status.live
      ? ["off air", "off"]
      : // a channel that has not started since the switch is not reconnecting, whatever failed
        status.transitioning
        ? ["switching…", "switching"]
        : // the server plays its RECONNECTING slate meanwhile: the channel is on, its source not
          status.reconnecting || status.upstream_down
          ? ["reconnecting", "reconnecting"]
          : !picture
            ? ["starting…", "switching"]
            : ["live", "live"];
  badge.textContent = label;
  badge.className = `badge ${kind}`;
}
