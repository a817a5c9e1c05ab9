// Step mode's keyboard: a presenter's clicker sends PageDown/PageUp (some send the arrow keys), so those keys move
// the stages while step mode is on the page. Keys typed into a control (a text box, a slider, a select) are left
// alone. When the stage changes, its top is scrolled into view, where the presenter is looking.
const INTERACTIVE = "input, textarea, select, [contenteditable=true], [role=slider], [role=combobox], [role=listbox]";
const NEXT = new Set(["PageDown", "ArrowRight"]);
const PREVIOUS = new Set(["PageUp", "ArrowLeft"]);

function onKey(event) {
  const marker = document.querySelector(".al-step-keys");
  if (!marker || !window.alStepKeys) return; // step mode is not on the page
  if (event.altKey || event.ctrlKey || event.metaKey || event.shiftKey) return;
  if (event.target instanceof Element && event.target.closest(INTERACTIVE)) return;
  const move = NEXT.has(event.key) ? "next" : PREVIOUS.has(event.key) ? "previous" : null;
  if (move === null) return;
  event.preventDefault(); // PageDown would scroll the page away from the stage
  window.alStepKeys(move);
}

export default function (component) {
  const { data, parentElement, setTriggerValue } = component;
  let marker = parentElement.querySelector(".al-step-keys");
  if (!marker) {
    marker = document.createElement("div");
    marker.className = "al-step-keys";
    parentElement.appendChild(marker);
  }
  window.alStepKeys = (move) => setTriggerValue("move", move);
  if (!window.alStepKeysBound) {
    window.alStepKeysBound = true;
    document.addEventListener("keydown", onKey);
  }
  const step = data && typeof data.step === "number" ? data.step : 0;
  if (marker.dataset.step !== undefined && marker.dataset.step !== String(step)) {
    marker.scrollIntoView({ block: "start", behavior: "instant" });
  }
  marker.dataset.step = String(step);
}
