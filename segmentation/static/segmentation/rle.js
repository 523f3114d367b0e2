// COCO run-length encoding, as the API sends masks.
//
// The runs cover the H x W mask in column-major order (down each column, then across),
// alternately background and object, starting with background. The counts string writes each
// run as little-endian groups of 5 bits (character code minus 48; 0x20 means another group
// follows, 0x10 in the last group makes the number negative), and from the fourth run on as the
// difference to the run two places before.

export function rleRuns(counts) {
  const runs = [];
  let position = 0;
  while (position < counts.length) {
    let value = 0;
    let scale = 1;
    let group;
    do {
      if (position === counts.length) throw new Error("the mask's counts end inside a number");
      group = counts.charCodeAt(position++) - 48;
      if (group < 0 || group > 63) throw new Error("the mask's counts hold a foreign character");
      value += (group & 0x1f) * scale;
      scale *= 32;
    } while (group & 0x20);
    if (group & 0x10) value -= scale; // the sign bit spreads over every higher bit
    if (runs.length > 2) value += runs[runs.length - 2];
    if (value < 0) throw new Error("the mask's counts give a negative run");
    runs.push(value);
  }
  return runs;
}

// The mask as a row-major Uint8Array of H * W (1: object), the layout of canvas pixels.
export function rleDecode({ size: [height, width], counts }) {
  const runs = rleRuns(counts);
  const mask = new Uint8Array(height * width);
  let start = 0;
  runs.forEach((length, index) => {
    if (start + length > height * width) throw new Error("the mask's runs overflow its size");
    if (index % 2 === 1) {
      let row = start % height;
      let column = (start - row) / height;
      for (let n = 0; n < length; n++) {
        mask[row * width + column] = 1;
        if (++row === height) {
          row = 0;
          column++;
        }
      }
    }
    start += length;
  });
  if (start !== height * width) throw new Error("the mask's runs do not cover its size");
  return mask;
}

// Whether the mask covers nothing: a single run of background, or none.
export function rleIsEmpty({ counts }) {
  const runs = rleRuns(counts);
  return runs.every((length, index) => index % 2 === 0 || length === 0);
}

// The mask of H x W that covers nothing: one run of background, written as above.
export function rleEmpty(height, width) {
  let value = height * width;
  let counts = "";
  for (;;) {
    let group = value % 32;
    value = Math.floor(value / 32);
    const more = value > 0 || group & 0x10; // a last group with 0x10 set would read as negative
    if (more) group |= 0x20;
    counts += String.fromCharCode(group + 48);
    if (!more) return { size: [height, width], counts };
  }
}
