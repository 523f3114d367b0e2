// The stream's state as a badge, the same on every page.

export function showState(badge, status) {
  const [label, kind] = !status.live
    ? ["off air", "off"]
    : status.upstream_down
      ? ["upstream down", "down"]
      : status.transitioning
        ? ["switching…", "switching"]
        : ["live", "live"];
  badge.textContent = label;
  badge.className = `badge ${kind}`;
}
