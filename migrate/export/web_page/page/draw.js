// Detections drawn for people to read, as `predict --png` draws them (migrate/common/draw.py, the
// TF1 Object Detection API's visualize_boxes_and_labels_on_image_array): each box outlined in a
// colour of its class, a filled strip above it (inside it at the image's top) with the class name
// and the score, e.g. `dog: 87%`. Boxes are [ymin, xmin, ymax, xmax] normalised to the image.

// draw.py's COLOURS, picked as class_id % 20.
const COLOURS = [
  [230, 25, 75], [60, 180, 75], [255, 225, 25], [0, 130, 200], [245, 130, 48],
  [145, 30, 180], [70, 240, 240], [240, 50, 230], [210, 245, 60], [250, 190, 212],
  [0, 128, 128], [220, 190, 255], [170, 110, 40], [255, 250, 200], [128, 0, 0],
  [170, 255, 195], [128, 128, 0], [255, 215, 180], [0, 0, 128], [128, 128, 128],
];

export const MIN_SCORE = 0.5; // draw.py's default: detections scoring less are not drawn

export function colourOf(classId) {
  return COLOURS[classId % COLOURS.length];
}

function css([r, g, b]) {
  return `rgb(${r}, ${g}, ${b})`;
}

// Black or white, whichever has the higher WCAG contrast ratio with the background.
function textColour(background) {
  const linear = background.map((c) => (c <= 10 ? c / 255 / 12.92 : ((c / 255 + 0.055) / 1.055) ** 2.4));
  const luminance = 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2];
  return (luminance + 0.05) / 0.05 >= 1.05 / (luminance + 0.05) ? "rgb(0, 0, 0)" : "rgb(255, 255, 255)";
}

// (font size, outline width) in pixels, growing mildly with the picture (draw.py's _sizes).
function sizes(height, width) {
  const short = Math.min(height, width);
  return [Math.floor(Math.min(Math.max(10 + short / 40, 11), 32)), Math.max(2, Math.round(short / 250))];
}

// Draws `record` (predict's JSON line) over the photo already on `context`'s canvas.
export function drawLabelled(context, record, labels, minScore = MIN_SCORE) {
  const { height, width } = record;
  const [fontSize, thickness] = sizes(height, width);
  const margin = Math.max(2, Math.floor(fontSize / 6));
  context.font = `${fontSize}px sans-serif`;
  context.textBaseline = "alphabetic";
  const tall = context.measureText("Ayg|%");
  const ascent = Math.ceil(tall.actualBoundingBoxAscent), descent = Math.ceil(tall.actualBoundingBoxDescent);
  const stripHeight = ascent + descent + 2 * margin;

  // Lowest score first, so the best box is drawn last, over the others.
  const shown = record.detections.filter((d) => d.score >= minScore && d.box.every(Number.isFinite))
    .sort((a, b) => a.score - b.score);
  const placed = [];
  for (const d of shown) {
    const [ymin, xmin, ymax, xmax] = d.box;
    // Pixel rows and columns the box covers: [0, 1] spans the whole image, 0..H-1.
    const x0 = Math.max(Math.floor(xmin * width), 0), y0 = Math.max(Math.floor(ymin * height), 0);
    const x1 = Math.min(Math.ceil(xmax * width) - 1, width - 1), y1 = Math.min(Math.ceil(ymax * height) - 1, height - 1);
    if (x1 < x0 || y1 < y0) continue; // wholly outside the image, or inside out
    const colour = colourOf(d.class_id);
    context.fillStyle = css(colour);
    // Pillow's outline goes inwards from the box's edge: four filled bands.
    const t = Math.min(thickness, x1 - x0 + 1, y1 - y0 + 1);
    context.fillRect(x0, y0, x1 - x0 + 1, t);
    context.fillRect(x0, y1 - t + 1, x1 - x0 + 1, t);
    context.fillRect(x0, y0, t, y1 - y0 + 1);
    context.fillRect(x1 - t + 1, y0, t, y1 - y0 + 1);
    placed.push([d, x0, y0, colour]);
  }
  // Strips after all outlines: no outline crosses a label, and the best label ends on top.
  for (const [d, x0, y0, colour] of placed) {
    const name = labels[d.class_id];
    const text = `${name || `id ${d.class_id}`}: ${Math.round(d.score * 100)}%`;
    const stripWidth = Math.ceil(context.measureText(text).width) + 2 * margin;
    const top = y0 >= stripHeight ? y0 - stripHeight : y0; // above the box; inside it at the top
    const left = Math.max(Math.min(x0, width - stripWidth), 0); // kept on the image at its right edge
    context.fillStyle = css(colour);
    context.fillRect(left, top, stripWidth, stripHeight);
    context.fillStyle = textColour(colour);
    context.fillText(text, left + margin, top + margin + ascent);
  }
}
