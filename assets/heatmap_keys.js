// The heatmap for a keyboard and a screen reader (issue 44), one mechanism for every heatmap of the app. Put in front
// of heatmap.js (assets/__init__.py), which calls accessible() once it has mounted a heatmap and accessibleUpdate()
// after each new payload, and draws state.focus in its overlay.
//
// - Tab stops on the plot (the overlay canvas: tabindex 0, role "application", so a screen reader hands it the keys).
// - Arrow keys move a visible focus cell by cell; Home/End go to the row's first/last cell, Ctrl+Home/Ctrl+End to the
//   first/last cell of all; PageUp/PageDown move a page of rows (a tenth of them, at least 5). A presenter's clicker
//   sends PageUp/PageDown too (assets/step_keys.js): the heatmap takes them only while it has the focus, and Escape
//   gives the focus back to the page, so the clicker steps again.
// - Each move is announced through a polite aria-live region: row token, column token, value ("blocked" for a masked
//   cell), as the hover readout shows them.
// - Enter or Space does what a click does: follows the row (selectable), or picks the cell (a question's grid).
// - A "Table" button (beside PNG and SVG) shows the same numbers as an HTML table with row and column headers, so a
//   screen reader reads a whole row; a large matrix shows the rows round the focus cell.

const TABLE_CELLS_MAX = 8192; // cells a table shows at once; a larger matrix shows a window of rows round the focus

function cellName(h, i, j) {
  return { row: h.rows[i], col: h.cols[j] };
}

// What a cell says: its value as the hover readout writes it, "blocked" for a masked cell, nothing of a question's grid.
function cellSays(state, i, j) {
  const h = state.header;
  const k = i * h.c + j;
  const isBlocked = state.blocked !== null && state.blocked[k] === 1;
  const picked = state.picked !== null && typeof state.picked === "object" && state.picked.i === i && state.picked.j === j;
  if (h.selectable === "cell" && h.blank !== false) return picked ? "picked" : "not picked";
  if (h.selectable === "cell" && picked) return `${readable(state.values[k], 4)}, picked`; // a map of values to click
  if (h.kind === "mask") return isBlocked || state.values[k] < 0.5 ? "blocked" : "may attend";
  if (isBlocked) return h.kind === "weights" ? "blocked, weight 0" : "blocked, score −∞";
  return readable(state.values[k], 4);
}

function announcement(state) {
  const { i, j } = state.focus;
  const { row, col } = cellName(state.header, i, j);
  return `row ${row}, column ${col}: ${cellSays(state, i, j)}`;
}

function announce(root, state) {
  const live = root.querySelector(".al-heatmap-live");
  if (!live || !state.focus) return;
  live.textContent = announcement(state);
  root.dataset.focus = `${state.focus.i},${state.focus.j}`;
}

function instructions(h) {
  const act = h.selectable === "cell" ? " Enter picks the cell." : h.selectable ? " Enter follows the row." : "";
  return `${h.title}: ${h.r} × ${h.c} heatmap. Arrow keys move from cell to cell, Home and End along a row, ` +
    `Page Up and Page Down a page of rows; Escape leaves.${act} The Table button shows the numbers as a table.`;
}

function move(state, key, ctrl) {
  const h = state.header;
  let { i, j } = state.focus;
  const page = Math.min(h.r - 1, Math.max(5, Math.ceil(h.r / 10)));
  if (key === "ArrowUp") i -= 1;
  else if (key === "ArrowDown") i += 1;
  else if (key === "ArrowLeft") j -= 1;
  else if (key === "ArrowRight") j += 1;
  else if (key === "Home") [i, j] = ctrl ? [0, 0] : [i, 0];
  else if (key === "End") [i, j] = ctrl ? [h.r - 1, h.c - 1] : [i, h.c - 1];
  else if (key === "PageUp") i -= page;
  else if (key === "PageDown") i += page;
  else return false;
  state.focus = { i: Math.max(0, Math.min(h.r - 1, i)), j: Math.max(0, Math.min(h.c - 1, j)) };
  return true;
}

// Enter/Space: what a click on the focus cell does (heatmap.js, the overlay's click handler).
function activate(root, state) {
  const h = state.header;
  if (!h.selectable) return;
  const { i, j } = state.focus;
  const asCell = h.selectable === "cell";
  state.picked = asCell ? { i, j } : i;
  drawOverlay(state);
  state.setTriggerValue("pick", asCell ? i * h.c + j : i);
  announce(root, state);
}

function onKey(root, state, event) {
  if (!state.header || !state.layout) return;
  if (event.altKey || event.metaKey) return;
  if (event.key === "Escape") {
    state.overlay.blur();
    return;
  }
  if (event.key === "Enter" || event.key === " ") {
    event.preventDefault();
    event.stopPropagation();
    activate(root, state);
    return;
  }
  if (!move(state, event.key, event.ctrlKey)) return;
  // taken here: the page must not scroll, and step mode's keys (listening on the document) must not step
  event.preventDefault();
  event.stopPropagation();
  drawOverlay(state);
  announce(root, state);
  if (state.tableOpen) fillTable(root, state);
}

// The table of the same numbers: row tokens head the rows, column tokens the columns (textContent only: user text).
function fillTable(root, state) {
  const box = root.alTable;
  const h = state.header;
  const rowsShown = Math.max(1, Math.min(h.r, Math.floor(TABLE_CELLS_MAX / h.c)));
  const centre = state.focus ? state.focus.i : 0;
  const first = Math.max(0, Math.min(h.r - rowsShown, centre - Math.floor(rowsShown / 2)));
  const key = `${h.id}:${first}`;
  if (box.dataset.shown === key) return;
  const table = document.createElement("table");
  const caption = document.createElement("caption");
  caption.textContent =
    rowsShown < h.r ? `${h.title}: rows ${first + 1} to ${first + rowsShown} of ${h.r} (move the focus for others)` : h.title;
  table.append(caption);
  const head = table.createTHead().insertRow();
  const corner = document.createElement("td");
  head.append(corner);
  for (let j = 0; j < h.c; j++) {
    const th = document.createElement("th");
    th.scope = "col";
    th.textContent = h.cols[j];
    head.append(th);
  }
  const body = table.createTBody();
  for (let i = first; i < first + rowsShown; i++) {
    const tr = body.insertRow();
    const th = document.createElement("th");
    th.scope = "row";
    th.textContent = h.rows[i];
    tr.append(th);
    for (let j = 0; j < h.c; j++) {
      const td = tr.insertCell();
      td.textContent = cellSays(state, i, j);
    }
  }
  box.replaceChildren(table);
  box.dataset.shown = key;
}

function tableButton(root, state) {
  const button = document.createElement("button");
  button.type = "button";
  button.className = "al-heatmap-table-button";
  button.textContent = "▦ Table";
  button.title = "Show the numbers as a table";
  button.setAttribute("aria-expanded", "false");
  button.addEventListener("click", () => {
    state.tableOpen = !state.tableOpen;
    button.setAttribute("aria-expanded", String(state.tableOpen));
    root.alTable.hidden = !state.tableOpen;
    if (state.tableOpen) fillTable(root, state);
  });
  return button;
}

function accessible(root, state) {
  const overlay = state.overlay;
  state.canvas.setAttribute("aria-hidden", "true"); // the focusable overlay carries the name
  state.canvas.removeAttribute("role");
  overlay.tabIndex = 0;
  overlay.setAttribute("role", "application");
  overlay.setAttribute("aria-roledescription", "heatmap");
  const live = document.createElement("div");
  live.className = "al-heatmap-live";
  live.setAttribute("aria-live", "polite");
  live.setAttribute("aria-atomic", "true");
  root.append(live);
  const box = document.createElement("div");
  box.className = "al-heatmap-table";
  box.hidden = true;
  box.tabIndex = 0; // it scrolls: a keyboard must reach it
  box.setAttribute("role", "region");
  root.alTable = box;
  root.after(box); // under the plot, in the page's flow (the plot's box has the canvas's height)
  const tools = root.querySelector(".al-heatmap-tools");
  if (tools) tools.prepend(tableButton(root, state));
  overlay.addEventListener("keydown", (event) => onKey(root, state, event));
  overlay.addEventListener("focus", () => {
    if (!state.header) return;
    if (!state.focus) {
      const p = state.picked;
      state.focus = p !== null && typeof p === "object" ? { ...p } : { i: typeof p === "number" ? p : 0, j: 0 };
    }
    root.dataset.focused = "true";
    if (state.layout) drawOverlay(state);
    announce(root, state);
  });
  overlay.addEventListener("blur", () => {
    delete root.dataset.focused;
    if (state.layout) drawOverlay(state);
  });
}

// After a new payload: the name, the focus kept inside the matrix, and an open table refilled.
function accessibleUpdate(root, state) {
  const h = state.header;
  state.overlay.setAttribute("aria-label", instructions(h));
  root.alTable.setAttribute("aria-label", `Table: ${h.title}`);
  const button = root.querySelector(".al-heatmap-table-button");
  if (button) button.setAttribute("aria-label", `Table of ${h.title || "the heatmap"}'s numbers`);
  if (state.focus) state.focus = { i: Math.min(state.focus.i, h.r - 1), j: Math.min(state.focus.j, h.c - 1) };
  if (state.tableOpen) fillTable(root, state);
  if (state.focus && document.activeElement === state.overlay) announce(root, state);
}
