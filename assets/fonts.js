// The app's font inside a downloaded figure (shared by assets/heatmap.js and assets/figures.js, put in front of each).
// An SVG drawn to a canvas through an <img> (a Vega chart's PNG) cannot reach the page's web fonts, and an SVG opened
// elsewhere may not find the font installed: both would fall back to a system font. So the figure's SVG carries the
// @font-face rules of the fonts it uses, each font inline as a data: URL. The rules are the ones the page itself
// loaded (Streamlit's Source Sans, from this server's static folder); a font is fetched from this server only, once a
// page, and a figure whose fonts are not web fonts embeds nothing.

// '"Source Sans", sans-serif' -> ["source sans", "sans-serif"]
function fontNames(list) {
  return String(list || "")
    .split(",")
    .map((name) => name.trim().replace(/^["']|["']$/g, "").toLowerCase())
    .filter(Boolean);
}

function fontFaceRules() {
  const rules = [];
  for (const sheet of document.styleSheets) {
    let list;
    try {
      list = sheet.cssRules;
    } catch {
      continue; // another origin's style sheet: its rules are not readable, and not ours
    }
    for (const rule of list) if (rule instanceof CSSFontFaceRule) rules.push(rule);
  }
  return rules;
}

// The rule's font as an address this page may fetch: a data: URL as it is, else the first source on this server.
function fontSource(rule) {
  const src = rule.style.getPropertyValue("src");
  for (const [, , raw] of src.matchAll(/url\(\s*(["']?)(.*?)\1\s*\)/g)) {
    if (raw.startsWith("data:")) return raw;
    const url = new URL(raw, (rule.parentStyleSheet && rule.parentStyleSheet.href) || document.baseURI);
    if (url.origin === location.origin) return url.href;
  }
  return null;
}

function asDataUrl(blob) {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve(reader.result);
    reader.onerror = () => reject(reader.error);
    reader.readAsDataURL(blob);
  });
}

const FACE_DESCRIPTORS = ["font-family", "font-style", "font-weight", "font-stretch", "unicode-range"];

async function inlineFace(rule, source) {
  let data = source;
  if (!source.startsWith("data:")) {
    const response = await fetch(source, { credentials: "same-origin" });
    if (!response.ok) throw new Error(`${source}: ${response.status}`);
    data = await asDataUrl(await response.blob());
  }
  const descriptors = FACE_DESCRIPTORS.map((name) => [name, rule.style.getPropertyValue(name)]).filter(([, v]) => v);
  return `@font-face { ${descriptors.map(([name, value]) => `${name}: ${value}; `).join("")}src: url("${data}"); }`;
}

// The @font-face rules, fonts inline, for what a figure's text uses: [{family: a CSS font-family list, style:
// "normal" | "italic"}]. "" when none of it is a web font of this page (or its fetch failed: the figure still saves).
async function embeddedFonts(uses) {
  const wanted = new Set();
  for (const { family, style } of uses) {
    for (const name of fontNames(family)) wanted.add(`${name}|${style || "normal"}`);
  }
  const cache = window.alFontFaces || (window.alFontFaces = new Map()); // one fetch a font, a page
  const faces = [];
  for (const rule of fontFaceRules()) {
    const name = fontNames(rule.style.getPropertyValue("font-family"))[0];
    const style = rule.style.getPropertyValue("font-style") || "normal";
    if (!wanted.has(`${name}|${style}`)) continue;
    const source = fontSource(rule);
    if (!source) continue; // served from elsewhere: never fetched
    const key = `${name}|${style}|${rule.style.getPropertyValue("font-weight")}|${source}`;
    if (!cache.has(key)) cache.set(key, inlineFace(rule, source).catch(() => ""));
    faces.push(cache.get(key));
  }
  return (await Promise.all(faces)).filter(Boolean).join("\n");
}

// The families and styles an SVG element's text is drawn in, as the page computes them (a Vega chart's).
function textFonts(svg) {
  const seen = new Map();
  for (const text of svg.querySelectorAll("text")) {
    const style = getComputedStyle(text);
    seen.set(`${style.fontFamily}|${style.fontStyle}`, { family: style.fontFamily, style: style.fontStyle });
  }
  return [...seen.values()];
}
