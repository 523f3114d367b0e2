// The programme guide's now and next as both pages show them: times in the browser's own
// time zone, and how far through the programme on now is, computed here so that the bar moves
// between the server's answers. A programme that ended since the answer gives way to the next.

function hhmm(isoTime) {
  const at = new Date(isoTime);
  return `${String(at.getHours()).padStart(2, "0")}:${String(at.getMinutes()).padStart(2, "0")}`;
}

// "19:00–20:30"
export function programmeTimes(programme) {
  return `${hhmm(programme.start)}–${hhmm(programme.stop)}`;
}

// The programme on at `at` (ms since the epoch) and the next, from an answer's `now` and
// `next`: null where the guide has none (or once the next has ended too).
export function nowAndNext(answer, at = Date.now()) {
  const ended = (programme) => programme && Date.parse(programme.stop) <= at;
  const started = (programme) => programme && Date.parse(programme.start) <= at;
  let now = answer?.now ?? null;
  let next = answer?.next ?? null;
  if (ended(now) || (!now && started(next))) [now, next] = [next, null];
  if (ended(now)) now = null;
  return { now, next };
}

// 0 to 1: how far through `programme` `at` is.
export function progressAt(programme, at = Date.now()) {
  const start = Date.parse(programme.start);
  const span = Date.parse(programme.stop) - start;
  return Math.min(1, Math.max(0, (at - start) / span));
}

// "Next 20:30 Late News"
export function nextWords(next) {
  return next ? `Next ${hhmm(next.start)} ${next.title}` : "";
}

// "19:00–20:30 Evening News: Part 2"
export function nowWords(now) {
  return now ? `${programmeTimes(now)} ${now.title}${now.subtitle ? `: ${now.subtitle}` : ""}` : "";
}
