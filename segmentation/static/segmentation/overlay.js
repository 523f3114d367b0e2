// Drawing over a frame: each object's mask as a translucent fill in its colour with an opaque
// outline, and the clicked points (a filled disc with a plus for "object here", a minus for
// "not here").

// Distinct colours, one per object in order; past the last, they come round again.
export const COLOURS = [
  [255, 64, 64], [64, 160, 255], [255, 200, 0], [60, 200, 90], [190, 90, 255],
  [255, 130, 30], [0, 210, 210], [255, 90, 190], [150, 200, 40], [120, 120, 255],
  [200, 150, 100], [0, 150, 110], [255, 160, 160], [100, 60, 200], [230, 230, 120],
];
export const FILL_ALPHA = 115;

export function colourOf(objectId) {
  const count = COLOURS.length;
  return COLOURS[(((objectId - 1) % count) + count) % count]; // IDs from 1; 0 takes the last
}

export function hexOf([red, green, blue]) {
  return `#${[red, green, blue].map((c) => c.toString(16).padStart(2, "0")).join("")}`;
}

// Paint the masks ({objectId: Uint8Array}) of one frame into an ImageData of width x height.
export function maskImage(masks, width, height) {
  const image = new ImageData(width, height);
  const pixels = image.data;
  for (const [objectId, mask] of masks) {
    const [red, green, blue] = colourOf(objectId);
    for (let y = 0, i = 0; y < height; y++) {
      for (let x = 0; x < width; x++, i++) {
        if (!mask[i]) continue;
        const edge =
          x === 0 || y === 0 || x === width - 1 || y === height - 1 ||
          !mask[i - 1] || !mask[i + 1] || !mask[i - width] || !mask[i + width];
        const p = i * 4;
        pixels[p] = red;
        pixels[p + 1] = green;
        pixels[p + 2] = blue;
        pixels[p + 3] = edge ? 255 : FILL_ALPHA;
      }
    }
  }
  return image;
}

// Points [{x, y, label}] in video pixels, in the colour of their object; radius in video pixels.
export function drawPoints(context, points, objectId, radius) {
  const colour = hexOf(colourOf(objectId));
  context.lineWidth = radius / 4;
  for (const { x, y, label } of points) {
    context.beginPath();
    context.arc(x, y, radius, 0, 2 * Math.PI);
    context.fillStyle = label ? colour : "#101418";
    context.fill();
    context.strokeStyle = label ? "#ffffff" : colour;
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
