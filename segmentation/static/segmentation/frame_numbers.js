// The server's API counts frames from 0 (its frame indices); the page shows them from 1, as its
// frame label, the go-to box and the end button do. Every message the server writes goes
// through `pageFrames` before a person reads it, so that its frame numbers are the page's:
// "end frame index 70 is before start frame index 90" reads "end frame 71 is before start
// frame 91". An annotation file's own fields keep their values ("frames[0].frame_index must be
// within 0..143, got 999" names what the file holds).

const NUMBERED = /\b(frame index|frame|frames up to|those from) (\d+)|\bframes 0\.\.(\d+)/g;

export function pageFrames(text) {
  if (typeof text !== "string") return text;
  return text.replace(NUMBERED, (match, words, number, last) =>
    words === undefined
      ? `frames 1..${Number(last) + 1}`
      : `${words === "frame index" ? "frame" : words} ${Number(number) + 1}`,
  );
}
