// Attention Lab's heatmap: one (rows × cols) matrix drawn on a canvas from a compact binary payload.
//
// Why a canvas and not Vega-Lite rect marks: a rect mark is one scene-graph item (and one SVG path) per
// cell, so a 512 × 512 matrix is 262,144 items per chart: seconds of main-thread work and gigabytes of
// browser memory for a page of them. Here the cells are one ImageData of rows × cols pixels scaled onto
// the plot, so drawing costs the same few milliseconds at any size; labels, legend, hover readout and
// clicks are drawn and handled by the code below.
//
// Payload (see ui.heatmap_payload): uint32 little-endian n, n bytes of JSON header (padded so the numbers
// start 4-byte aligned), rows × cols float32 values row by row, then, when header.blocked, rows × cols
// bytes (1 = blocked: drawn grey, its value shown as "0 (masked)" or "−∞ (blocked)").
//
// Contract for tests and benchmarks: the root element `.al-heatmap` carries data-title, data-rows,
// data-cols and, once drawn, data-drawn = header.id (a digest of the payload), data-label-px (the
// smallest axis-label font used), data-number-px (the cells' numbers' font size, "" when none are drawn)
// and data-measures (text measurements the last draw took); `root.alHeatmap` holds the decoded header,
// values and blocked flags. PNG and SVG buttons download the figure (see "downloads" below).

const VIRIDIS =
  "440154470e61481a6c482575472f7d443a834144873d4e8a39568c35608d31688e2d708e2a788e27818e23888e21918d" +
  "1f988b1fa08822a8842ab07f35b77943bf7154c56866cc5d7ad1518fd744a5db36bcdf27d2e21be9e51afde725";
const BLUE_ORANGE = "134b852f78b35da2cb9dcae1d2e5eff2f0ebfce0bafbbf74e8932fc5690d994a07";
const BLOCKED = [200, 200, 200];
const MASK = { on: [76, 120, 168], off: [217, 217, 217] };

// Vega's continuous schemes, interpolated linearly in RGB between their stops, as 256-entry tables.
function table(hex) {
  const stops = [];
  for (let k = 0; k < hex.length; k += 6) {
    stops.push([0, 2, 4].map((o) => parseInt(hex.slice(k + o, k + o + 2), 16)));
  }
  const n = stops.length - 1;
  const out = new Uint8ClampedArray(256 * 3);
  for (let t = 0; t < 256; t++) {
    const x = (t / 255) * n;
    const k = Math.min(Math.floor(x), n - 1);
    const f = x - k;
    for (let ch = 0; ch < 3; ch++) out[t * 3 + ch] = stops[k][ch] + (stops[k + 1][ch] - stops[k][ch]) * f;
  }
  return out;
}
const TABLES = { weights: table(VIRIDIS), diverging: table(BLUE_ORANGE) };

function decode(bytes) {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const n = view.getUint32(0, true);
  const header = JSON.parse(new TextDecoder().decode(bytes.subarray(4, 4 + n)));
  const cells = header.r * header.c;
  const start = 4 + n;
  // slice() copies into a fresh, aligned buffer (the message's bytes may start anywhere)
  const values = new Float32Array(bytes.slice(start, start + 4 * cells).buffer);
  const blocked = header.blocked ? bytes.slice(start + 4 * cells, start + 5 * cells) : null;
  return { header, values, blocked };
}

const BLANK = [240, 242, 246, 255]; // the app's secondary background

// Every cell's colour into RGBA pixels: the hot loop at 262,144 cells, so no allocation per cell.
function paint(h, values, blocked, px) {
  const n = h.r * h.c;
  if (h.selectable === "cell" && h.blank !== false) {
    // a question's blank grid: one pale colour, nothing of any value (the answer is drawn only after the commit)
    for (let k = 0; k < n; k++) px.set(BLANK, 4 * k);
    return;
  }
  const off = h.kind === "mask" ? MASK.off : BLOCKED;
  if (h.kind === "mask") {
    for (let k = 0; k < n; k++) {
      const rgb = (blocked === null || blocked[k] === 0) && values[k] > 0.5 ? MASK.on : MASK.off;
      px[4 * k] = rgb[0];
      px[4 * k + 1] = rgb[1];
      px[4 * k + 2] = rgb[2];
      px[4 * k + 3] = 255;
    }
    return;
  }
  const lut = TABLES[h.kind] || TABLES.diverging;
  const weights = h.kind === "weights";
  const m = h.maxAbs > 0 ? h.maxAbs : 1;
  const top = h.top > 0 ? h.top : 1; // weights: 0 to 1, or to the largest weight shown (small multiples)
  for (let k = 0; k < n; k++) {
    const v = values[k];
    if ((blocked !== null && blocked[k] === 1) || !(v === v) || v === Infinity || v === -Infinity) {
      px[4 * k] = off[0];
      px[4 * k + 1] = off[1];
      px[4 * k + 2] = off[2];
    } else {
      let t = weights ? v / top : (v + m) / (2 * m);
      t = t < 0 ? 0 : t > 1 ? 1 : t;
      const i = Math.round(t * 255) * 3;
      px[4 * k] = lut[i];
      px[4 * k + 1] = lut[i + 1];
      px[4 * k + 2] = lut[i + 2];
    }
    px[4 * k + 3] = 255;
  }
}

// A number as a person reads it: four significant decimals, scientific notation when tiny or huge.
function readable(v, digits) {
  if (!Number.isFinite(v)) return v < 0 ? "−∞" : "∞";
  if (v === 0) return "0";
  const a = Math.abs(v);
  if (a < 1e-3 || a >= 1e5) return v.toExponential(2).replace("-", "−");
  return v.toFixed(digits).replace("-", "−");
}

// A cell's number with `digits` decimals (2, or 1 where two would not fit at a readable size: see numberSize).
function cellText(h, v, isBlocked, digits = 2) {
  if (h.kind === "mask") return isBlocked || v < 0.5 ? "0" : "1";
  if (isBlocked) return h.kind === "weights" ? "0" : "−∞";
  const shown = v.toFixed(digits);
  return Number(shown) === 0 ? shown.replace("-", "") : shown.replace("-", "−"); // no "−0.00"
}

function tooltipValue(h, v, isBlocked) {
  if (h.kind === "mask") return isBlocked || v < 0.5 ? "blocked" : "may attend";
  if (isBlocked) return h.kind === "weights" ? "0 (masked)" : "−∞ (blocked)";
  return readable(v, 4);
}

// Every k-th label, k the smallest step that leaves `need` pixels between shown labels.
function stride(cell, need) {
  return cell >= need ? 1 : Math.ceil(need / cell);
}

// A label cut with an ellipsis to `limit` pixels. A label may be a 10,000-character word (typed or from a link):
// it is clipped to CLIP characters before anything is measured (no font draws a character under 0.3 px, so more
// can never fit), then the cut is found by halving, so a label costs at most ~10 measurements whatever its length.
const CLIP = 300;
let measured = 0; // measureText calls, for tests (root.dataset.measures: this draw's count)

function measure(ctx, text) {
  measured++;
  return ctx.measureText(text.length > CLIP ? text.slice(0, CLIP) : text).width;
}

function ellipsis(ctx, text, limit) {
  if (text.length <= CLIP && measure(ctx, text) <= limit) return text;
  let lo = 0; // the longest prefix known to fit with its ellipsis
  let hi = Math.min(text.length, CLIP); // a prefix known (or taken) not to fit
  while (hi - lo > 1) {
    const mid = (lo + hi) >> 1;
    if (measure(ctx, text.slice(0, mid) + "…") <= limit) lo = mid;
    else hi = mid;
  }
  return text.slice(0, Math.max(lo, 1)) + "…";
}

const LABEL_LIMIT = 90; // px: longer token labels are cut with an ellipsis (the tooltip has them whole)

// The page's layout, or with `figure` a downloaded file's: the page's plot at its size in its font (figure.plotW,
// figure.family), the colour bar beside it and margins all round (figure.pad), whatever the page left out (figureOf).
function layout(root, state, figure = null) {
  const { header: h } = state;
  const family = figure ? figure.family : getComputedStyle(root).fontFamily || "sans-serif";
  const pad = figure ? figure.pad : 0;
  const probe = state.probe || (state.probe = document.createElement("canvas").getContext("2d"));
  // type follows the page's root font size (presenter mode enlarges it): 1 at Streamlit's 16 px
  const scale = parseFloat(getComputedStyle(document.documentElement).fontSize) / 16 || 1;
  const titleSize = (h.titleSize || 14) * scale;
  const titleH = h.title ? Math.round(titleSize * 1.6) : 0;
  const plotH = h.plotHeight * scale; // taller rows for larger type
  const cellH = plotH / h.r;
  // labels: 12 px where every one fits, never under 10 px; thinned to every k-th where they do not fit
  const rowFont = Math.max(10 * scale, Math.min(12 * scale, Math.floor(cellH * 0.85)));
  const rowStep = stride(cellH, rowFont * 1.15);
  probe.font = `${rowFont}px ${family}`;
  let rowW = 0;
  const rowLabels = h.rowLabels !== false; // small multiples after the first of a row share its row labels
  for (let i = 0; rowLabels && i < h.r; i += rowStep) {
    rowW = Math.max(rowW, Math.min(measure(probe, h.rows[i]), LABEL_LIMIT));
  }
  let legendW = 0;
  if (h.legend) {
    probe.font = `${11 * scale}px ${family}`;
    const texts = h.kind === "mask" ? ["may attend"] : h.kind === "weights" ? ["1.00"] : [readable(-h.maxAbs, 2)];
    legendW = Math.ceil(Math.max(...texts.map((t) => probe.measureText(t).width))) + 34 * scale;
  }
  // without row labels, room on the left for the first slanted column label (it leans left of its column)
  probe.font = `${12 * scale}px ${family}`;
  const lean = Math.min(measure(probe, h.cols[0] || ""), LABEL_LIMIT) * Math.SQRT1_2;
  const left = pad + (rowLabels ? Math.ceil(rowW) + 8 : Math.ceil(Math.max(lean - 4, 2)));
  // a narrow column (a projector, three charts side by side) moves the colour bar under the plot when that is
  // what keeps the cells at least 12 px wide; a file has no column: its bar is beside the page's plot
  const width = figure ? 0 : Math.max(root.clientWidth, 120);
  const beside = h.legend && (figure !== null || (width - left - legendW - 4) / h.c >= 12);
  const below = h.legend && !beside;
  const plotW = figure ? figure.plotW : Math.max(width - left - (beside ? legendW : 0) - 4, 20);
  const cellW = plotW / h.c;
  const colFont = Math.max(10 * scale, Math.min(12 * scale, Math.floor(cellW * 0.75)));
  const colStep = stride(cellW, colFont * 1.5); // slanted 45°: baselines 1.5 font sizes apart
  probe.font = `${colFont}px ${family}`;
  let colW = 0;
  for (let j = 0; j < h.c; j += colStep) colW = Math.max(colW, Math.min(measure(probe, h.cols[j]), LABEL_LIMIT));
  const bottom = Math.ceil(colW * Math.SQRT1_2 + colFont) + 6;
  const legendH = below ? 34 * scale : 0;
  const top = pad + titleH;
  const height = top + plotH + bottom + legendH + pad;
  // the colour bar's place: beside the plot its top is the high end; below it, low runs left to high at the right
  const legendBar = below ? Math.max(Math.min(plotW, 180), 60) : 12;
  const legendX = beside ? left + plotW + 12 : left;
  const legendY = beside ? top : top + plotH + bottom + 2;
  return { family, scale, width: figure ? left + plotW + (beside ? legendW : 4) + pad : width, height, pad, titleH,
           titleSize, left, top, plotW, plotH, cellW, cellH, rowFont, rowStep, colFont, colStep, legendW,
           labelPx: Math.min(rowFont, colFont), legend: beside ? "right" : below ? "below" : "none", legendX, legendY,
           legendBar };
}

function drawCells(state) {
  const { header: h, values, blocked } = state;
  let off = state.cells;
  if (!off || off.width !== h.c || off.height !== h.r) {
    off = state.cells = document.createElement("canvas");
    off.width = h.c;
    off.height = h.r;
  }
  const octx = off.getContext("2d");
  const image = octx.createImageData(h.c, h.r);
  paint(h, values, blocked, image.data);
  octx.putImageData(image, 0, 0);
}

function draw(root, state) {
  measured = 0;
  const L = (state.layout = layout(root, state));
  const dpr = window.devicePixelRatio || 1;
  const canvas = state.canvas;
  canvas.width = Math.round(L.width * dpr);
  canvas.height = Math.round(L.height * dpr);
  canvas.style.width = `${L.width}px`;
  canvas.style.height = `${L.height}px`;
  state.overlay.width = canvas.width;
  state.overlay.height = canvas.height;
  state.overlay.style.width = canvas.style.width;
  state.overlay.style.height = canvas.style.height;
  root.style.height = `${L.height}px`;
  const ctx = canvas.getContext("2d");
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  ctx.clearRect(0, 0, L.width, L.height);
  const numberPx = render(ctx, state, L, inkOf(root));
  root.dataset.labelPx = String(L.labelPx);
  root.dataset.cellPx = String(Math.min(L.cellW, L.cellH).toFixed(2));
  root.dataset.numberPx = numberPx ? numberPx.toFixed(2) : ""; // the numbers' font size, "" when none are drawn
  root.dataset.measures = String(measured); // text measurements this draw took (bounded, whatever the labels)
  drawOverlay(state);
}

function inkOf(root) {
  return getComputedStyle(root).color || "#31333f";
}

// The numbers' font size and decimals: as large as the widest number fits in a cell (measured, not guessed), at most
// 13 px (scaled with the type), with two decimals, or one where two would not fit (omega's "−12.34" at 1024 px wide).
// Under a floor they are not drawn and left to the hover readout: 11 px, under which they strain the eye (issue 32:
// an 8 px grid of embeddings at 1400 px wide), 12 px in presenter mode (type enlarged), which a room reads from the
// back. Returns { size, digits }, size 0 when no number is drawn.
function numberSize(ctx, state, L) {
  const { header: h, values, blocked } = state;
  const floor = L.scale > 1 ? 12 : 11;
  ctx.font = `100px ${L.family}`;
  for (const digits of [2, 1]) {
    let widest = digits === 2 ? "0.00" : "0.0";
    for (let k = 0; k < h.r * h.c; k++) {
      const text = cellText(h, values[k], blocked !== null && blocked[k] === 1, digits);
      if (text.length > widest.length) widest = text;
    }
    const perPx = measure(ctx, widest) / 100; // width of the widest number a pixel of font size
    const size = Math.min(13 * L.scale, (L.cellW * 0.88) / perPx, L.cellH * 0.62);
    if (size >= floor) return { size: Math.floor(size * 4) / 4, digits };
  }
  return { size: 0, digits: 2 };
}

// Everything but the hover overlay, onto a 2D context: the page's canvas, a 2x canvas for a PNG, or an SVG
// recorder (svgContext) for an SVG, so all three show the same figure. Returns the numbers' font size (0: none).
function render(ctx, state, L, ink, background) {
  const { header: h, values, blocked } = state;
  if (background) {
    ctx.fillStyle = background;
    ctx.fillRect(0, 0, L.width, L.height);
  }
  ctx.fillStyle = ink;
  ctx.textBaseline = "middle";
  if (h.title) {
    ctx.font = `600 ${L.titleSize}px ${L.family}`;
    ctx.textAlign = "left";
    ctx.fillText(ellipsis(ctx, h.title, L.width - 2 * L.pad - 4), L.pad, L.pad + L.titleH / 2);
  }
  // the cells: one pixel each, scaled; nearest-neighbour when cells are larger than pixels, else smoothed
  ctx.imageSmoothingEnabled = L.cellW * (window.devicePixelRatio || 1) < 1 || L.cellH * (window.devicePixelRatio || 1) < 1;
  ctx.drawImage(state.cells, L.left, L.top, L.plotW, L.plotH);
  if (h.selectable === "cell") {
    // a question's blank grid: its cells outlined, so that a row of them reads as cells to click, not one bar
    ctx.strokeStyle = "#8a8d99";
    ctx.lineWidth = 1;
    for (let i = 0; i < h.r; i++) {
      for (let j = 0; j < h.c; j++) ctx.strokeRect(L.left + j * L.cellW + 0.5, L.top + i * L.cellH + 0.5, L.cellW - 1, L.cellH - 1);
    }
    ctx.fillStyle = ink;
  }
  hatchBlocked(ctx, state, L);
  // row labels
  ctx.font = `${L.rowFont}px ${L.family}`;
  ctx.textAlign = "right";
  ctx.fillStyle = ink;
  for (let i = 0; h.rowLabels !== false && i < h.r; i += L.rowStep) {
    ctx.fillText(ellipsis(ctx, h.rows[i], LABEL_LIMIT), L.left - 5, L.top + (i + 0.5) * L.cellH);
  }
  // column labels, slanted 45° like the tutorials' plots
  ctx.font = `${L.colFont}px ${L.family}`;
  ctx.textAlign = "right";
  for (let j = 0; j < h.c; j += L.colStep) {
    ctx.save();
    ctx.translate(L.left + (j + 0.5) * L.cellW, L.top + L.plotH + 5);
    ctx.rotate(-Math.PI / 4);
    ctx.fillText(ellipsis(ctx, h.cols[j], LABEL_LIMIT), 0, 0);
    ctx.restore();
  }
  // numbers in the cells, where the matrix is small and they fit
  const { size, digits } = h.annotate ? numberSize(ctx, state, L) : { size: 0, digits: 2 };
  if (size) {
    ctx.font = `${size}px ${L.family}`;
    ctx.textAlign = "center";
    for (let i = 0; i < h.r; i++) {
      for (let j = 0; j < h.c; j++) {
        const k = i * h.c + j;
        const isBlocked = blocked !== null && blocked[k] === 1;
        const v = values[k];
        let dark;
        if (h.kind === "weights") dark = isBlocked ? false : v < 0.5 * (h.top || 1);
        else if (h.kind === "mask") dark = !isBlocked && v > 0.5;
        else dark = !isBlocked && Math.abs(v) > 0.6 * h.maxAbs;
        ctx.fillStyle = dark ? "#ffffff" : "#000000";
        ctx.fillText(cellText(h, v, isBlocked, digits), L.left + (j + 0.5) * L.cellW, L.top + (i + 0.5) * L.cellH);
      }
    }
  }
  if (h.legend) drawLegend(ctx, h, L, ink);
  return size;
}

// A blocked cell (masked, −∞, or a mask's 0) is hatched as well as grey, so that it never reads by colour alone (WCAG
// 1.4.1): one diagonal stroke a cell, where cells are at least 6 px (smaller ones: the hover readout and the keys).
function isOff(h, values, blocked, k) {
  if (blocked !== null && blocked[k] === 1) return true;
  if (h.kind === "mask") return !(values[k] > 0.5);
  return !Number.isFinite(values[k]);
}

// corner: a short stroke across the cell's top right corner, clear of a number in the middle; else corner to corner
function hatch(ctx, x, y, w, hgt, corner = false) {
  const m = Math.min(w, hgt) * 0.15;
  const d = corner ? Math.min(w, hgt) * 0.3 : 0; // the stroke's length along each side, in the corner
  if (corner) {
    ctx.moveTo(x + w - m - d, y + m);
    ctx.lineTo(x + w - m, y + m + d);
    return;
  }
  ctx.moveTo(x + m, y + hgt - m);
  ctx.lineTo(x + w - m, y + m);
}

function hatchBlocked(ctx, state, L) {
  const { header: h, values, blocked } = state;
  if (h.selectable === "cell" || L.cellW < 6 || L.cellH < 6 || (blocked === null && h.kind !== "mask")) return;
  ctx.strokeStyle = "rgba(0, 0, 0, 0.45)";
  ctx.lineWidth = 1;
  ctx.beginPath();
  for (let i = 0; i < h.r; i++) {
    for (let j = 0; j < h.c; j++) {
      if (isOff(h, values, blocked, i * h.c + j)) {
        hatch(ctx, L.left + j * L.cellW, L.top + i * L.cellH, L.cellW, L.cellH, Boolean(h.annotate));
      }
    }
  }
  ctx.stroke();
}

function drawLegend(ctx, h, L, ink) {
  if (L.legend === "below") return drawLegendBelow(ctx, h, L, ink);
  const x = L.legendX;
  ctx.font = `${11 * L.scale}px ${L.family}`;
  ctx.textAlign = "left";
  ctx.fillStyle = ink;
  if (h.kind === "mask") {
    [["may attend", MASK.on], ["blocked", MASK.off]].forEach(([name, rgb], k) => {
      const y = L.top + 6 + k * 18;
      ctx.fillStyle = `rgb(${rgb.join(",")})`;
      ctx.fillRect(x, y, 12, 12);
      if (k === 1) swatchHatch(ctx, x, y);
      ctx.fillStyle = ink;
      ctx.fillText(name, x + 17, y + 6);
    });
    return;
  }
  const barH = Math.min(L.plotH, 200);
  const lut = TABLES[h.kind] || TABLES.diverging;
  for (let y = 0; y < barH; y++) {
    const t = Math.round((1 - y / (barH - 1)) * 255) * 3;
    ctx.fillStyle = `rgb(${lut[t]},${lut[t + 1]},${lut[t + 2]})`;
    ctx.fillRect(x, L.top + y, 12, 1);
  }
  const [lo, hi] = h.kind === "weights" ? [0, h.top || 1] : [-h.maxAbs, h.maxAbs];
  ctx.fillStyle = ink;
  ctx.textBaseline = "middle";
  [[hi, 0], [(lo + hi) / 2, barH / 2], [lo, barH]].forEach(([v, y]) => {
    ctx.fillText(readable(v, 2), x + 16, L.top + Math.min(Math.max(y, 6), barH - 6));
  });
}

function swatchHatch(ctx, x, y) {
  ctx.strokeStyle = "rgba(0, 0, 0, 0.45)";
  ctx.lineWidth = 1;
  ctx.beginPath();
  hatch(ctx, x, y, 12, 12);
  ctx.stroke();
}

// The colour key under the plot, for narrow columns: a horizontal bar, low to high, with three labels under it.
function drawLegendBelow(ctx, h, L, ink) {
  ctx.font = `${11 * L.scale}px ${L.family}`;
  ctx.textBaseline = "middle";
  const y = L.legendY;
  if (h.kind === "mask") {
    let x = L.left;
    for (const [name, rgb] of [["may attend", MASK.on], ["blocked", MASK.off]]) {
      ctx.fillStyle = `rgb(${rgb.join(",")})`;
      ctx.fillRect(x, y + 4, 12, 12);
      if (rgb === MASK.off) swatchHatch(ctx, x, y + 4);
      ctx.fillStyle = ink;
      ctx.textAlign = "left";
      ctx.fillText(name, x + 16, y + 10);
      x += 16 + ctx.measureText(name).width + 14;
    }
    return;
  }
  const barW = L.legendBar;
  const lut = TABLES[h.kind] || TABLES.diverging;
  for (let x = 0; x < barW; x++) {
    const t = Math.round((x / (barW - 1)) * 255) * 3;
    ctx.fillStyle = `rgb(${lut[t]},${lut[t + 1]},${lut[t + 2]})`;
    ctx.fillRect(L.left + x, y, 1, 10);
  }
  const [lo, hi] = h.kind === "weights" ? [0, h.top || 1] : [-h.maxAbs, h.maxAbs];
  ctx.fillStyle = ink;
  [[lo, 0, "left"], [(lo + hi) / 2, barW / 2, "center"], [hi, barW, "right"]].forEach(([v, x, align]) => {
    ctx.textAlign = align;
    ctx.fillText(readable(v, 2), L.left + x, y + 22);
  });
}

// ---------------------------------------------------------------------------------------------- downloads
// PNG (at 2x, crisp on slides) and SVG (text stays text) of the figure as shown, made to stand alone (figureOf):
// title, labels, numbers and colour bar, in the theme's ink on the theme's background. Built in the browser from the
// same render() as the page.

const FIGURE_PAD = 16; // px of margin round a downloaded figure: its title and labels clear of the file's edge

// A file stands alone, without the page's captions and neighbours: the page's plot at its size, with its colour bar
// (small multiples leave theirs to one caption on the page: issue 32's per-head figures had no scale) and its row
// labels (which they share with the first of their row), and a margin all round. What render() draws for a file.
function figureOf(root) {
  const state = root.alState;
  const figure = { ...state, header: { ...state.header, legend: true, rowLabels: true } };
  const { plotW, family } = state.layout;
  return { state: figure, L: layout(root, figure, { pad: FIGURE_PAD, plotW, family }) };
}

function pageBackground() {
  const app = document.querySelector('[data-testid="stApp"]');
  const colour = app ? getComputedStyle(app).backgroundColor : "";
  return colour && colour !== "rgba(0, 0, 0, 0)" && colour !== "transparent" ? colour : "#ffffff";
}

const SVG_CELLS_MAX = 4096; // up to 64 x 64 the cells are rects (vector); larger matrices embed them as an image

function escapeXml(text) {
  return String(text).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
}

// The subset of CanvasRenderingContext2D that render() uses, writing SVG elements instead of pixels.
function svgContext(width, height) {
  const parts = [];
  const stack = [];
  let transform = [];
  const probe = document.createElement("canvas").getContext("2d");
  const anchor = { left: "start", start: "start", right: "end", end: "end", center: "middle" };
  const ctx = {
    fillStyle: "#000",
    font: "10px sans-serif",
    textAlign: "left",
    textBaseline: "middle",
    imageSmoothingEnabled: false,
    attr() {
      return transform.length ? ` transform="${transform.join(" ")}"` : "";
    },
    save() {
      stack.push([...transform]);
    },
    restore() {
      transform = stack.pop() || [];
    },
    translate(x, y) {
      transform.push(`translate(${x.toFixed(2)} ${y.toFixed(2)})`);
    },
    rotate(angle) {
      transform.push(`rotate(${((angle * 180) / Math.PI).toFixed(3)})`);
    },
    setTransform() {},
    clearRect() {},
    measureText(text) {
      probe.font = ctx.font;
      return probe.measureText(text);
    },
    strokeStyle: "#000",
    lineWidth: 1,
    path: [],
    beginPath() {
      ctx.path = [];
    },
    moveTo(x, y) {
      ctx.path.push(`M${x.toFixed(2)} ${y.toFixed(2)}`);
    },
    lineTo(x, y) {
      ctx.path.push(`L${x.toFixed(2)} ${y.toFixed(2)}`);
    },
    stroke() {
      if (ctx.path.length) parts.push(`<path d="${ctx.path.join("")}" fill="none" stroke="${escapeXml(ctx.strokeStyle)}" stroke-width="${ctx.lineWidth}"${ctx.attr()}/>`);
    },
    strokeRect(x, y, w, h) {
      parts.push(`<rect x="${x.toFixed(2)}" y="${y.toFixed(2)}" width="${w.toFixed(2)}" height="${h.toFixed(2)}" fill="none" stroke="${escapeXml(ctx.strokeStyle)}" stroke-width="${ctx.lineWidth}"${ctx.attr()}/>`);
    },
    fillRect(x, y, w, h) {
      parts.push(`<rect x="${x.toFixed(2)}" y="${y.toFixed(2)}" width="${w.toFixed(2)}" height="${h.toFixed(2)}" fill="${escapeXml(ctx.fillStyle)}"${ctx.attr()}/>`);
    },
    fillText(text, x, y) {
      const baseline = ctx.textBaseline === "middle" ? ' dominant-baseline="central"' : "";
      parts.push(`<text x="${x.toFixed(2)}" y="${y.toFixed(2)}" text-anchor="${anchor[ctx.textAlign] || "start"}"${baseline} fill="${escapeXml(ctx.fillStyle)}" style="font: ${escapeXml(ctx.font)}"${ctx.attr()}>${escapeXml(text)}</text>`);
    },
    drawImage(image, x, y, w, h) {
      const cols = image.width;
      const rows = image.height;
      if (cols * rows <= SVG_CELLS_MAX) {
        const px = image.getContext("2d").getImageData(0, 0, cols, rows).data;
        const cw = w / cols;
        const ch = h / rows;
        for (let i = 0; i < rows; i++) {
          for (let j = 0; j < cols; j++) {
            const k = 4 * (i * cols + j);
            // a hair wider than the cell, so no background line shows between neighbours
            parts.push(`<rect x="${(x + j * cw).toFixed(2)}" y="${(y + i * ch).toFixed(2)}" width="${(cw + 0.3).toFixed(2)}" height="${(ch + 0.3).toFixed(2)}" fill="rgb(${px[k]},${px[k + 1]},${px[k + 2]})"/>`);
          }
        }
      } else {
        const smooth = ctx.imageSmoothingEnabled ? "" : ' style="image-rendering: pixelated"';
        parts.push(`<image x="${x}" y="${y}" width="${w}" height="${h}" preserveAspectRatio="none"${smooth} href="${image.toDataURL("image/png")}"/>`);
      }
    },
    // fonts: @font-face rules for the text (assets/fonts.js), so it reads in the app's font wherever it opens
    toString(fonts = "") {
      const style = fonts ? `<style><![CDATA[\n${fonts}\n]]></style>\n` : "";
      return `<?xml version="1.0" encoding="UTF-8"?>\n<svg xmlns="http://www.w3.org/2000/svg" width="${Math.ceil(width)}" height="${Math.ceil(height)}" viewBox="0 0 ${Math.ceil(width)} ${Math.ceil(height)}">\n${style}${parts.join("\n")}\n</svg>\n`;
    },
  };
  return ctx;
}

async function heatmapSvg(root) {
  const { state, L } = figureOf(root);
  const ctx = svgContext(L.width, L.height);
  render(ctx, state, L, inkOf(root), pageBackground());
  const fonts = await embeddedFonts([{ family: L.family, style: "normal" }]);
  return new Blob([ctx.toString(fonts)], { type: "image/svg+xml" });
}

// Drawn on a canvas of the page, so in the page's own fonts: the font is made sure of first (the title's weight and
// the numbers' may not have been drawn on the page yet).
async function heatmapPng(root, factor = 2) {
  const { state, L } = figureOf(root);
  const fonts = [`${L.rowFont}px ${L.family}`, `600 ${L.titleSize}px ${L.family}`];
  await Promise.all(fonts.map((font) => document.fonts.load(font)));
  const canvas = document.createElement("canvas");
  canvas.width = Math.round(L.width * factor);
  canvas.height = Math.round(L.height * factor);
  const ctx = canvas.getContext("2d");
  ctx.setTransform(factor, 0, 0, factor, 0, 0);
  render(ctx, state, L, inkOf(root), pageBackground());
  return new Promise((resolve) => canvas.toBlob(resolve, "image/png"));
}

function slug(title) {
  const s = String(title || "figure").normalize("NFKD").replace(/[^\w]+/g, "-").replace(/^-+|-+$/g, "").toLowerCase();
  return s.slice(0, 60) || "figure";
}

function save(blob, name) {
  const url = URL.createObjectURL(blob);
  const a = document.createElement("a");
  a.href = url;
  a.download = name;
  document.body.appendChild(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

// For the page's "all figures" archive (assets/figures.js): every drawn heatmap's files.
window.alHeatmapFiles = async () => {
  const files = [];
  for (const root of document.querySelectorAll(".al-heatmap[data-drawn]")) {
    if (!root.alState || !root.alState.layout) continue;
    const name = slug(root.dataset.title);
    files.push({ name: `${name}.png`, blob: await heatmapPng(root) });
    files.push({ name: `${name}.svg`, blob: await heatmapSvg(root) });
  }
  return files;
};

function toolbar(root) {
  const bar = document.createElement("div");
  bar.className = "al-heatmap-tools";
  for (const [format, text] of [["png", "PNG"], ["svg", "SVG"]]) {
    const button = document.createElement("button");
    button.type = "button";
    button.textContent = `⤓ ${text}`;
    button.title = format === "png" ? "Download as PNG (2x, for slides)" : "Download as SVG (vector, for papers)";
    button.setAttribute("aria-label", `Download ${root.dataset.title || "heatmap"} as ${text}`);
    button.addEventListener("click", async () => {
      if (!root.alState.layout) return;
      const name = `${slug(root.dataset.title)}.${format}`;
      save(format === "png" ? await heatmapPng(root) : await heatmapSvg(root), name);
    });
    bar.append(button);
  }
  return bar;
}

// The hovered cell's outline and the picked row's frame, on a canvas of their own (no redraw of cells).
function drawOverlay(state) {
  const L = state.layout;
  const dpr = window.devicePixelRatio || 1;
  const ctx = state.overlay.getContext("2d");
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  ctx.clearRect(0, 0, L.width, L.height);
  const frame = (x, y, w, h, colour) => {
    ctx.strokeStyle = colour;
    ctx.lineWidth = 2;
    ctx.strokeRect(x + 1, y + 1, Math.max(w - 2, 1), Math.max(h - 2, 1));
  };
  const picked = state.picked;
  if (picked !== null && typeof picked === "object") {
    frame(L.left + picked.j * L.cellW, L.top + picked.i * L.cellH, L.cellW, L.cellH, "#e66100"); // a picked cell
  } else if (picked !== null && picked < state.header.r) {
    frame(L.left, L.top + picked * L.cellH, L.plotW, L.cellH, "#e66100");
  }
  if (state.focus && document.activeElement === state.overlay) {
    // the keyboard's focus cell (assets/heatmap_keys.js): a thick frame in the theme's ink over a white one
    const { i, j } = state.focus;
    frame(L.left + j * L.cellW - 1, L.top + i * L.cellH - 1, L.cellW + 2, L.cellH + 2, "#ffffff");
    ctx.lineWidth = 3;
    ctx.strokeStyle = "#e66100";
    ctx.strokeRect(L.left + j * L.cellW - 3, L.top + i * L.cellH - 3, L.cellW + 6, L.cellH + 6);
  }
  if (state.hover) {
    const { i, j } = state.hover;
    ctx.strokeStyle = "#000";
    frame(L.left + j * L.cellW - 1, L.top + i * L.cellH - 1, L.cellW + 2, L.cellH + 2, "#ffffff");
    frame(L.left + j * L.cellW - 2, L.top + i * L.cellH - 2, L.cellW + 4, L.cellH + 4, "#000000");
  }
}

function cellAt(state, event) {
  const L = state.layout;
  const box = state.overlay.getBoundingClientRect();
  const x = event.clientX - box.left - L.left;
  const y = event.clientY - box.top - L.top;
  if (x < 0 || y < 0 || x >= L.plotW || y >= L.plotH) return null;
  return { i: Math.min(Math.floor(y / L.cellH), state.header.r - 1), j: Math.min(Math.floor(x / L.cellW), state.header.c - 1) };
}

function showTip(root, state, event, cell) {
  const tip = state.tip;
  if (!cell) {
    tip.hidden = true;
    return;
  }
  const h = state.header;
  const k = cell.i * h.c + cell.j;
  const isBlocked = state.blocked !== null && state.blocked[k] === 1;
  // textContent only: labels are the user's text and must never become markup
  tip.replaceChildren();
  const lines = [["row", h.rows[cell.i]], ["column", h.cols[cell.j]]];
  // a question's blank grid has no value to read (its cells hold nothing of the answer)
  if (h.selectable !== "cell" || h.blank === false) lines.push([h.kind === "mask" ? "cell" : "value", tooltipValue(h, state.values[k], isBlocked)]);
  for (const [name, value] of lines) {
    const line = document.createElement("div");
    const b = document.createElement("b");
    b.textContent = `${name} `;
    line.append(b, document.createTextNode(value));
    tip.append(line);
  }
  if (h.selectable) {
    const hint = document.createElement("div");
    hint.className = "al-heatmap-hint";
    hint.textContent = h.selectable === "cell" ? "click to pick this cell" : "click to follow this row";
    tip.append(hint);
  }
  tip.hidden = false;
  const box = root.getBoundingClientRect();
  const x = event.clientX - box.left;
  const y = event.clientY - box.top;
  const right = x + 14 + tip.offsetWidth > box.width;
  tip.style.left = `${right ? x - 14 - tip.offsetWidth : x + 14}px`;
  tip.style.top = `${Math.max(y - tip.offsetHeight - 8, 0)}px`;
}

function mount(parentElement, setTriggerValue) {
  const root = document.createElement("div");
  root.className = "al-heatmap";
  const canvas = document.createElement("canvas");
  const overlay = document.createElement("canvas");
  overlay.className = "al-heatmap-overlay";
  const tip = document.createElement("div");
  tip.className = "al-heatmap-tip";
  tip.hidden = true;
  root.append(canvas, overlay, tip);
  root.append(toolbar(root));
  parentElement.appendChild(root);
  const state = { canvas, overlay, tip, hover: null, picked: null, focus: null, tableOpen: false, setTriggerValue };
  root.alState = state;
  accessible(root, state); // keyboard, announcements and the table (assets/heatmap_keys.js)
  overlay.addEventListener("pointermove", (event) => {
    if (!state.layout) return;
    const cell = cellAt(state, event);
    const same = cell && state.hover && cell.i === state.hover.i && cell.j === state.hover.j;
    if (!same) {
      state.hover = cell;
      drawOverlay(state);
    }
    overlay.style.cursor = cell && state.header.selectable ? "pointer" : "default";
    showTip(root, state, event, cell);
  });
  overlay.addEventListener("pointerleave", () => {
    state.hover = null;
    tip.hidden = true;
    if (state.layout) drawOverlay(state);
  });
  overlay.addEventListener("click", (event) => {
    if (!state.layout || !state.header.selectable) return;
    const cell = cellAt(state, event);
    if (!cell) return;
    // selectable "cell": the cell, sent as its index row by row (a question's answer); otherwise the row
    const asCell = state.header.selectable === "cell";
    state.picked = asCell ? cell : cell.i;
    state.focus = { ...cell }; // the keyboard's focus cell follows the click (else two cells look picked)
    drawOverlay(state);
    state.setTriggerValue("pick", asCell ? cell.i * state.header.c + cell.j : cell.i);
  });
  // a narrower window (a projector, a closed sidebar) re-lays the chart out; the cells are not recoloured
  let pending = false;
  new ResizeObserver(() => {
    if (pending || !state.header) return;
    pending = true;
    requestAnimationFrame(() => {
      pending = false;
      if (state.header && Math.abs(root.clientWidth - state.layout.width) >= 1) draw(root, state);
    });
  }).observe(root);
  return root;
}

export default function (component) {
  const { data, parentElement, setTriggerValue } = component;
  // no numbers (dashboard.py shows one such while torch is imported, so that this script is loaded early): nothing
  // to draw, nothing mounted
  if (!data || !data.byteLength) return;
  const root = parentElement.querySelector(".al-heatmap") || mount(parentElement, setTriggerValue);
  const state = root.alState;
  state.setTriggerValue = setTriggerValue;
  const started = performance.now();
  const decoded = decode(data);
  const h = decoded.header;
  if (root.dataset.drawn === h.id && state.header) return; // the same numbers: nothing to redraw
  if (state.header && (state.header.r !== h.r || state.header.rows.join("\u0000") !== h.rows.join("\u0000"))) {
    state.picked = null; // another sentence: the picked row means something else
  }
  if (h.picked !== null && h.picked !== undefined) {
    state.picked = h.selectable === "cell" ? { i: Math.floor(h.picked / h.c), j: h.picked % h.c } : h.picked;
  }
  Object.assign(state, decoded);
  root.alHeatmap = decoded;
  root.dataset.title = h.title;
  root.dataset.rows = String(h.r);
  root.dataset.cols = String(h.c);
  root.dataset.kind = h.kind;
  // "cell": a question's blank grid; "cells": a map of values whose cells are clicked (the chat page's heads)
  root.dataset.pick = h.selectable === "cell" ? (h.blank === false ? "cells" : "cell") : h.selectable ? "row" : "";
  state.canvas.setAttribute("aria-label", `${h.title}: ${h.r} × ${h.c} heatmap`);
  for (const button of root.querySelectorAll(".al-heatmap-tools button:not(.al-heatmap-table-button)")) {
    button.setAttribute("aria-label", `Download ${h.title || "heatmap"} as ${button.textContent.slice(2)}`);
  }
  drawCells(state);
  draw(root, state);
  accessibleUpdate(root, state);
  root.dataset.drawn = h.id;
  // how long this heatmap took to decode and draw, for the browser benchmark (performance.getEntriesByName)
  performance.measure(`al-heatmap ${h.r}x${h.c}`, { start: started });
}
