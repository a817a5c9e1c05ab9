// A page's figures for slides and papers, built in the browser (no server dependency): every Vega-Lite chart gets
// PNG (2x) and SVG buttons like the heatmaps' (assets/heatmap.js), and the page's button downloads every figure,
// heatmaps and charts, as PNG and SVG in one .zip. Each file shows the figure as drawn: title, labels, colour bar,
// in the theme's colours on the theme's background.

const FIGURE_TOOLS = "al-figure-tools";

function background() {
  const app = document.querySelector('[data-testid="stApp"]');
  const colour = app ? getComputedStyle(app).backgroundColor : "";
  return colour && colour !== "rgba(0, 0, 0, 0)" ? colour : "#ffffff";
}

function slug(title) {
  const s = String(title || "").normalize("NFKD").replace(/[^\w]+/g, "-").replace(/^-+|-+$/g, "").toLowerCase();
  return s.slice(0, 60);
}

function chartTitle(embed) {
  const title = embed.querySelector(".role-title-text, .role-title text");
  return (title && title.textContent) || "";
}

// A Vega chart's SVG as a standalone file: the page background behind it, gradients (colour bars) referenced by id
// instead of by the page's address (Vega writes url(<address>#gradient_n)), and the fonts of its text inline
// (assets/fonts.js: the PNG is drawn from this SVG through an <img>, which cannot reach the page's web fonts).
async function chartSvg(embed) {
  const svg = embed.querySelector("svg");
  const copy = svg.cloneNode(true);
  copy.setAttribute("xmlns", "http://www.w3.org/2000/svg");
  const box = svg.getBoundingClientRect();
  const width = Math.ceil(box.width);
  const height = Math.ceil(box.height);
  copy.setAttribute("width", width);
  copy.setAttribute("height", height);
  const rect = document.createElementNS("http://www.w3.org/2000/svg", "rect");
  rect.setAttribute("width", "100%");
  rect.setAttribute("height", "100%");
  rect.setAttribute("fill", background());
  copy.insertBefore(rect, copy.firstChild);
  const fonts = await embeddedFonts(textFonts(svg));
  if (fonts) {
    const style = document.createElementNS("http://www.w3.org/2000/svg", "style");
    style.textContent = fonts;
    copy.insertBefore(style, copy.firstChild);
  }
  const text = new XMLSerializer().serializeToString(copy).replace(/url\((['"]?)[^)#'"]*#/g, "url($1#");
  return { blob: new Blob(['<?xml version="1.0" encoding="UTF-8"?>\n', text], { type: "image/svg+xml" }), width, height };
}

async function chartPng(embed, factor = 2) {
  const { blob, width, height } = await chartSvg(embed);
  const url = URL.createObjectURL(blob);
  return new Promise((resolve, reject) => {
    const image = new Image();
    image.onload = () => {
      const canvas = document.createElement("canvas");
      canvas.width = Math.round(width * factor);
      canvas.height = Math.round(height * factor);
      const ctx = canvas.getContext("2d");
      ctx.scale(factor, factor);
      ctx.drawImage(image, 0, 0, width, height);
      URL.revokeObjectURL(url);
      canvas.toBlob(resolve, "image/png");
    };
    image.onerror = reject;
    image.src = url;
  });
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

function charts() {
  return [...document.querySelectorAll(".vega-embed")].filter((e) => e.querySelector("svg"));
}

function chartName(embed) {
  const k = charts().indexOf(embed);
  return slug(chartTitle(embed)) || `chart-${k + 1}`;
}

// PNG and SVG buttons on every Vega chart (shown on hover, like the heatmaps'); charts redrawn get them again.
function addTools() {
  for (const embed of charts()) {
    if (embed.querySelector(`:scope > .${FIGURE_TOOLS}`)) continue;
    const bar = document.createElement("div");
    bar.className = FIGURE_TOOLS;
    for (const [format, text] of [["png", "PNG"], ["svg", "SVG"]]) {
      const button = document.createElement("button");
      button.type = "button";
      button.textContent = `⤓ ${text}`;
      button.setAttribute("aria-label", `Download ${chartTitle(embed) || "chart"} as ${text}`);
      button.addEventListener("click", async () => {
        const blob = format === "png" ? await chartPng(embed) : (await chartSvg(embed)).blob;
        save(blob, `${chartName(embed)}.${format}`);
      });
      bar.append(button);
    }
    embed.style.position = "relative";
    embed.append(bar);
  }
}

// ------------------------------------------------------------------------------------------ a .zip, stored
const CRC = new Uint32Array(256).map((_, n) => {
  let c = n;
  for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  return c >>> 0;
});

function crc32(bytes) {
  let c = 0xffffffff;
  for (let i = 0; i < bytes.length; i++) c = CRC[(c ^ bytes[i]) & 0xff] ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

// A zip archive of uncompressed entries (PNGs are compressed already): local headers, data, central directory.
async function zip(files) {
  const encoder = new TextEncoder();
  const chunks = [];
  const central = [];
  let offset = 0;
  for (const file of files) {
    const name = encoder.encode(file.name);
    const data = new Uint8Array(await file.blob.arrayBuffer());
    const crc = crc32(data);
    const local = new DataView(new ArrayBuffer(30));
    local.setUint32(0, 0x04034b50, true);
    local.setUint16(4, 20, true);
    local.setUint16(6, 0x0800, true); // names in UTF-8
    local.setUint32(14, crc, true);
    local.setUint32(18, data.length, true);
    local.setUint32(22, data.length, true);
    local.setUint16(26, name.length, true);
    chunks.push(new Uint8Array(local.buffer), name, data);
    const entry = new DataView(new ArrayBuffer(46));
    entry.setUint32(0, 0x02014b50, true);
    entry.setUint16(4, 20, true);
    entry.setUint16(6, 20, true);
    entry.setUint16(8, 0x0800, true);
    entry.setUint32(16, crc, true);
    entry.setUint32(20, data.length, true);
    entry.setUint32(24, data.length, true);
    entry.setUint16(28, name.length, true);
    entry.setUint32(42, offset, true);
    central.push(new Uint8Array(entry.buffer), name);
    offset += 30 + name.length + data.length;
  }
  const size = central.reduce((n, part) => n + part.length, 0);
  const end = new DataView(new ArrayBuffer(22));
  end.setUint32(0, 0x06054b50, true);
  end.setUint16(8, files.length, true);
  end.setUint16(10, files.length, true);
  end.setUint32(12, size, true);
  end.setUint32(16, offset, true);
  return new Blob([...chunks, ...central, new Uint8Array(end.buffer)], { type: "application/zip" });
}

async function allFiles() {
  const files = window.alHeatmapFiles ? await window.alHeatmapFiles() : [];
  for (const embed of charts()) {
    const name = chartName(embed);
    files.push({ name: `${name}.png`, blob: await chartPng(embed) });
    files.push({ name: `${name}.svg`, blob: (await chartSvg(embed)).blob });
  }
  // one name a file: a second "softmax-weights.png" becomes "softmax-weights-2.png"
  const seen = new Map();
  for (const file of files) {
    const n = (seen.get(file.name) || 0) + 1;
    seen.set(file.name, n);
    if (n > 1) file.name = file.name.replace(/(\.\w+)$/, `-${n}$1`);
  }
  return files;
}

export default function (component) {
  const { data, parentElement } = component;
  let button = parentElement.querySelector("button.al-figures");
  if (!button) {
    button = document.createElement("button");
    button.type = "button";
    button.className = "al-figures";
    button.textContent = "⤓ All figures (.zip: PNG and SVG)";
    button.addEventListener("click", async () => {
      button.disabled = true;
      try {
        const files = await allFiles();
        save(await zip(files), `${button.dataset.page || "figures"}.zip`);
      } finally {
        button.disabled = false;
      }
    });
    parentElement.appendChild(button);
  }
  // the archive is named after the page (its URL path; the first page is served at /)
  button.dataset.page = `${location.pathname.split("/").filter(Boolean).pop() || (data && data.page) || "figures"}-figures`;
  addTools();
  if (!window.alFigureObserver) {
    // charts drawn after this component (a rerun's later elements, a resize) get their buttons too
    let pending = false;
    window.alFigureObserver = new MutationObserver(() => {
      if (pending) return;
      pending = true;
      setTimeout(() => {
        pending = false;
        addTools();
      }, 300);
    });
    window.alFigureObserver.observe(document.body, { childList: true, subtree: true });
  }
}
