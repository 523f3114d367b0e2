// Drawing over a frame: each object's mask as a translucent fill in its colour inside an opaque
// outline, dark on a light fill and light on a dark one, the clicked points (a disc with a plus
// for "object here", a minus for "not here", each drawn against its fill) and the box prompt, a
// rectangle.
//
// An object's colour is its ID's from the palette, the first of the session's objects to take
// it (an object whose ID's colour another object holds takes the palette's next free one), so
// that colours stay apart within a session and the same objects get the same colours in any
// session (`assignColour`). Where the object itself is near its colour (object 1's red on a red
// ball), its fill is taken instead from colours kept for that, which no ID has, the farthest
// from the colours under its mask (`pickColour`): it cannot meet another object's own colour.

// Well-separated colours (no two nearer than 90 in RGB), one per object ID in order; past the
// last, they come round again.
export const COLOURS = [
  [255, 64, 64], [64, 160, 255], [255, 200, 0], [60, 200, 90], [150, 70, 255],
  [0, 230, 200], [255, 90, 190], [150, 90, 20], [180, 250, 60], [30, 40, 150],
];
// For an object that lies near its own colour: no ID's colour, and apart from those too.
export const AWAY_COLOURS = [[0, 120, 120], [150, 0, 90], [0, 90, 0], [150, 220, 255], [255, 180, 150]];
// Over half opaque: a fill chosen away from the object's colour must not mix back into it (cyan at
// 45% over the red ball read as grey).
export const FILL_ALPHA = 150;
export const OUTLINE_PX = 2;
export const DARK_OUTLINE = [16, 20, 24];
export const LIGHT_OUTLINE = [255, 255, 255];
// Below this distance in RGB from the mean colour under its mask, a fill does not stand out.
export const FAR_ENOUGH = 120;
const LIGHT_FILL = 140; // luminance (0-255) above which a fill takes the dark outline

export function colourOf(objectId) {
  const count = COLOURS.length;
  return COLOURS[(((objectId - 1) % count) + count) % count]; // IDs from 1; 0 takes the last
}

function same(a, b) {
  return a[0] === b[0] && a[1] === b[1] && a[2] === b[2];
}

// A new object's colour: its ID's, or if another object holds that, the palette's next one that
// none holds (then a kept one; all held: its ID's all the same). `taken`: the others' colours.
export function assignColour(objectId, taken) {
  const free = (colour) => !taken.some((other) => same(other, colour));
  const start = COLOURS.indexOf(colourOf(objectId));
  const order = [...COLOURS.slice(start), ...COLOURS.slice(0, start), ...AWAY_COLOURS];
  return order.find(free) ?? colourOf(objectId);
}

export function hexOf([red, green, blue]) {
  return `#${[red, green, blue].map((c) => c.toString(16).padStart(2, "0")).join("")}`;
}

function luminance([red, green, blue]) {
  return 0.2126 * red + 0.7152 * green + 0.0722 * blue;
}

export function outlineOf(colour) {
  return luminance(colour) > LIGHT_FILL ? DARK_OUTLINE : LIGHT_OUTLINE;
}

function distance(a, b) {
  return Math.hypot(a[0] - b[0], a[1] - b[1], a[2] - b[2]);
}

// The mean [r, g, b] of the frame's RGBA pixels under the mask; null for an empty mask.
export function meanUnder(pixels, mask) {
  const sum = [0, 0, 0];
  let count = 0;
  for (let i = 0; i < mask.length; i++) {
    if (!mask[i]) continue;
    sum[0] += pixels[i * 4];
    sum[1] += pixels[i * 4 + 1];
    sum[2] += pixels[i * 4 + 2];
    count++;
  }
  return count ? sum.map((value) => Math.round(value / count)) : null;
}

// The object's own colour if it stands out from the mean colour under its mask; else the kept
// colour farthest from that mean that no other object shows (all shown: any colour none shows;
// none: the farthest), so that objects stay told apart. `taken`: the others' colours.
export function pickColour(own, under, taken) {
  if (distance(own, under) >= FAR_ENOUGH) return own;
  const free = (colour) => !taken.some((other) => same(other, colour));
  const away = AWAY_COLOURS.filter(free);
  const any = [...COLOURS, ...AWAY_COLOURS].filter(free);
  const candidates = away.length ? away : any.length ? any : AWAY_COLOURS;
  return candidates.reduce((best, colour) => (distance(colour, under) > distance(best, under) ? colour : best));
}

// For each pixel of the mask, 1..OUTLINE_PX: how far in from its border it lies (the frame's
// edge counts as a border); 0 deeper in, and outside. The outline lies inside the mask, so that
// it marks exactly the mask's extent.
function rings(mask, width, height) {
  const ring = new Uint8Array(mask.length);
  const outside = (i, pass) => !mask[i] || (ring[i] > 0 && ring[i] < pass);
  for (let pass = 1; pass <= OUTLINE_PX; pass++) {
    for (let y = 0, i = 0; y < height; y++) {
      for (let x = 0; x < width; x++, i++) {
        if (!mask[i] || ring[i]) continue;
        if (
          x === 0 || y === 0 || x === width - 1 || y === height - 1 ||
          outside(i - 1, pass) || outside(i + 1, pass) || outside(i - width, pass) || outside(i + width, pass)
        ) ring[i] = pass;
      }
    }
  }
  return ring;
}

// Paint the masks ({objectId: Uint8Array}) of one frame into an ImageData of width x height, each
// in colours(objectId).
export function maskImage(masks, width, height, colours = colourOf) {
  const image = new ImageData(width, height);
  const pixels = image.data;
  for (const [objectId, mask] of masks) {
    const fill = colours(objectId);
    const line = outlineOf(fill);
    const ring = rings(mask, width, height);
    for (let i = 0; i < mask.length; i++) {
      if (!mask[i]) continue;
      const [red, green, blue] = ring[i] ? line : fill;
      const p = i * 4;
      pixels[p] = red;
      pixels[p + 1] = green;
      pixels[p + 2] = blue;
      pixels[p + 3] = ring[i] ? 255 : FILL_ALPHA;
    }
  }
  return image;
}

// A box from corner a to corner b ({x, y} in video pixels) in the colour [r, g, b]: a line of
// its colour over a wider dark one, so that it shows on light and dark frames alike; dashed
// while it is being dragged.
export function drawBox(context, a, b, objectColour, lineWidth, { dashed = false } = {}) {
  const [x, y, w, h] = [Math.min(a.x, b.x), Math.min(a.y, b.y), Math.abs(b.x - a.x), Math.abs(b.y - a.y)];
  context.save();
  context.setLineDash(dashed ? [lineWidth * 3, lineWidth * 2] : []);
  context.lineWidth = lineWidth * 2;
  context.strokeStyle = "#101418";
  context.strokeRect(x, y, w, h);
  context.lineWidth = lineWidth;
  context.strokeStyle = hexOf(objectColour);
  context.strokeRect(x, y, w, h);
  context.restore();
}

// Points [{x, y, label}] in video pixels, in their object's colour [r, g, b]; radius in video
// pixels. A box's corners (labels 2 and 3, as addPoints takes them) are drawn as its rectangle.
// A point lies on its object's fill (or just beside it), so its marks are in the fill's outline
// colour, which stands out from it: a disc of the object's colour ringed and crossed in it for
// "object here", a disc of it with the object's colour for "not here".
export function drawPoints(context, points, objectColour, radius) {
  const colour = hexOf(objectColour);
  const contrast = hexOf(outlineOf(objectColour));
  const topLeft = points.find((p) => p.label === 2);
  const bottomRight = points.find((p) => p.label === 3);
  if (topLeft && bottomRight) drawBox(context, topLeft, bottomRight, objectColour, radius / 3);
  context.lineWidth = radius / 4;
  for (const { x, y, label } of points) {
    if (label > 1) continue;
    context.beginPath();
    context.arc(x, y, radius, 0, 2 * Math.PI);
    context.fillStyle = label ? colour : contrast;
    context.fill();
    context.strokeStyle = label ? contrast : colour;
    context.stroke();
    context.beginPath();
    context.moveTo(x - radius / 2, y);
    context.lineTo(x + radius / 2, y);
    if (label) {
      context.moveTo(x, y - radius / 2);
      context.lineTo(x, y + radius / 2);
    }
    context.stroke();
  }
}
