// Accessibility fixes applied from our side to markup Streamlit draws itself (docs/accessibility.md names the
// upstream issue of each). Mounted once a run by dashboard.py, drawing nothing; a MutationObserver applies the fixes
// again whenever Streamlit redraws the part they touch (a page change redraws the navigation).
//
// 1. The sidebar's navigation with sections: Streamlit 1.67 draws <ul> > <div> (a section: <header>, then <li>s), so
//    the list holds no list items and the items have no list (axe: "list", "listitem"; WCAG 1.3.1). Each section
//    becomes a list of its own, named by its header: a screen reader hears "Attention, list, 6 items".
// 2. The dark theme's primary buttons: Streamlit writes white on the primary colour, 2.8:1 on the dark theme's
//    light teal (a11y.css writes dark text on it; WCAG 1.4.3). markTheme() says which theme is shown.
// 3. An SVG exposed as an image (role="img") without a name, outside our own figures: inside a control (a button,
//    a link) it is decoration, hidden from assistive technology; elsewhere it takes the name of its closest named
//    element, or is hidden when there is none (axe: "svg-img-alt"; WCAG 1.1.1). The charts' marks, which were
//    such images, are described in their specs (ui.charts.described).

function fixNavigation() {
  for (const list of document.querySelectorAll('ul[data-testid="stSidebarNavItems"]')) {
    const children = [...list.children];
    if (!children.some((c) => c.tagName !== "LI")) continue; // no sections: a valid list already
    if (children.some((c) => c.tagName === "LI")) continue; // mixed: left as it is (never drawn by this app)
    if (list.getAttribute("role") !== "none") list.setAttribute("role", "none");
    for (const section of children) {
      const header = section.querySelector(":scope > header");
      const name = header ? header.textContent.trim() : "";
      if (section.getAttribute("role") !== "list") section.setAttribute("role", "list");
      if (name && section.getAttribute("aria-label") !== name) section.setAttribute("aria-label", name);
      if (header && header.getAttribute("role") !== "none") header.setAttribute("role", "none");
    }
  }
}

function named(element) {
  return Boolean(
    element.getAttribute("aria-label") || element.getAttribute("aria-labelledby") || element.getAttribute("title"),
  );
}

function fixIcons() {
  for (const svg of document.querySelectorAll('svg[role="img"]:not([data-al-a11y])')) {
    if (svg.closest(".al-heatmap, .vega-embed")) continue; // our figures name themselves (ui.charts.described)
    svg.setAttribute("data-al-a11y", "");
    if (named(svg) || svg.querySelector(":scope > title")) continue;
    const control = svg.parentElement && svg.parentElement.closest("button, a, [role=button], [role=link], label");
    const titled = svg.closest("[title], [aria-label]");
    const name = titled ? titled.getAttribute("aria-label") || titled.getAttribute("title") : "";
    if (control || !name) svg.setAttribute("aria-hidden", "true"); // decoration, or a control that has the name
    else svg.setAttribute("aria-label", name);
  }
}

// The theme in use, as html[data-al-theme] (light or dark) for assets/a11y.css: Streamlit marks it nowhere, and the
// viewer may switch it in the menu's settings. Read from the app's background.
function markTheme() {
  const app = document.querySelector('[data-testid="stApp"]');
  const rgb = app ? (getComputedStyle(app).backgroundColor.match(/\d+/g) || []).map(Number) : [];
  if (rgb.length < 3) return;
  const theme = 0.299 * rgb[0] + 0.587 * rgb[1] + 0.114 * rgb[2] < 128 ? "dark" : "light";
  if (document.documentElement.dataset.alTheme !== theme) document.documentElement.dataset.alTheme = theme;
}

function fixAll() {
  markTheme();
  fixNavigation();
  fixIcons();
}

export default function () {
  fixAll();
  if (window.alA11yObserver) return;
  let pending = false;
  window.alA11yObserver = new MutationObserver(() => {
    if (pending) return;
    pending = true;
    requestAnimationFrame(() => {
      pending = false;
      fixAll();
    });
  });
  // class changes too: a theme switched in the settings restyles the app without adding an element
  window.alA11yObserver.observe(document.body, { childList: true, subtree: true, attributes: true, attributeFilter: ["class"] });
}
