// A presenter's clicker: it sends PageDown/PageUp (some send the arrow keys), and those keys move whatever the page
// steps through (step mode's stages, the KV cache's decoding step, FlashAttention's key blocks, Watch it learn's
// timeline) while such a stepper is on the page. Keys typed into a control that uses them (a text box, a slider, a select) are left alone
// (but for PageDown/PageUp on the stepper's own slider: see onSliderKey);
// a switch or a button does not use them, so the keys work right after step mode is switched on with the mouse
// (the focus stays on the switch). With data.stage (a CSS selector), the stage is scrolled to the top of the
// window when it first shows (unless data.on_open is false: a page that opens on its title and controls) and
// whenever it changes: a clicker cannot scroll, and a stage fits a projector's 768 px.
const INTERACTIVE =
  "input:not([type=checkbox]):not([role=switch]), textarea, select, [contenteditable=true], [role=slider], " +
  "[role=combobox], [role=listbox], [role=radiogroup], [role=spinbutton]";
const NEXT = new Set(["PageDown", "ArrowRight"]);
const PREVIOUS = new Set(["PageUp", "ArrowLeft"]);

// data.hold: a press while the page's script runs is dropped, not sent. The course's reveal may compute for seconds
// (a model read for the first time): a second press sent meanwhile would move on before the room saw the reveal.
function running() {
  const app = document.querySelector('[data-testid="stApp"]');
  return app !== null && app.dataset.testScriptState === "running";
}

// A text box applies its text on Ctrl+Enter (Streamlit's rule) but keeps the focus, and a focused box keeps the
// clicker's keys for itself (PageDown moved its caret, nothing else, until Esc). Once the text is applied, the focus
// goes back to the page, and the popover the box sits in (presenter mode's "Sentence") closes: the next PageDown is
// the clicker's.
function onApply(event) {
  if (!(event.key === "Enter" && (event.ctrlKey || event.metaKey))) return;
  const box = event.target instanceof Element ? event.target.closest("textarea, input[type=text]") : null;
  if (!box || !document.querySelector(".al-step-keys")) return;
  setTimeout(() => {
    box.blur(); // after Streamlit's own handler has taken the text
    if (box.closest('[data-testid="stPopoverBody"]')) {
      document.dispatchEvent(new KeyboardEvent("keydown", { key: "Escape", bubbles: true }));
    }
  }, 0);
}

function onKey(event) {
  onApply(event);
  const marker = document.querySelector(".al-step-keys");
  if (!marker || !window.alStepKeys) return; // no stepper on the page
  if (event.altKey || event.ctrlKey || event.metaKey || event.shiftKey) return;
  if (event.target instanceof Element && event.target.closest(INTERACTIVE)) return;
  const move = NEXT.has(event.key) ? "next" : PREVIOUS.has(event.key) ? "previous" : null;
  if (move === null) return;
  event.preventDefault(); // PageDown would scroll the page away from the stage
  if (window.alStepHold && running()) return; // see data.hold
  window.alStepKeys(move);
}

// A stepper's own slider (data.slider: a CSS selector of its widget, e.g. Watch it learn's timeline) moves by the
// clicker's rule too. A focused slider (an <input type=range>) takes PageDown as "a page down", a tenth of its range
// back, where the clicker means "next": caught on the way down, before the slider sees it, and sent as the clicker's
// one step on. Its arrow keys are the slider's own, one step each way, as the clicker's are.
function onSliderKey(event) {
  const slider = window.alStepSlider;
  if (!slider || !window.alStepKeys || !(event.key === "PageDown" || event.key === "PageUp")) return;
  if (event.altKey || event.ctrlKey || event.metaKey || event.shiftKey) return;
  const thumb = `${slider} input[type=range], ${slider} [role=slider]`; // Streamlit's slider is a native range
  if (!(event.target instanceof Element) || !event.target.closest(thumb)) return;
  event.preventDefault();
  event.stopPropagation();
  window.alStepKeys(NEXT.has(event.key) ? "next" : "previous");
}

// The page draws a new timeline slider each time it moves the timeline itself (ui/training.py, `timeline`: a slider
// whose value the script set would be reported back at its old value). A focused slider hands its focus on to the one
// that replaces it, so the clicker's keys and the arrows go on moving the timeline right after a PageDown.
function keepSliderFocus() {
  if (window.alSliderFocus !== undefined) return;
  window.alSliderFocus = null; // the focused slider, while it is the stepper's own
  const thumbOf = (element) => {
    const slider = window.alStepSlider;
    if (!slider || !(element instanceof Element)) return null;
    return element.closest(`${slider} input[type=range], ${slider} [role=slider]`);
  };
  document.addEventListener("focusin", (event) => {
    window.alSliderFocus = thumbOf(event.target); // focus elsewhere: nothing to hand on
  });
  new MutationObserver(() => {
    const gone = window.alSliderFocus;
    if (!gone || gone.isConnected || (document.activeElement && document.activeElement !== document.body)) return;
    const slider = window.alStepSlider;
    const next = slider && document.querySelector(`${slider} input[type=range], ${slider} [role=slider]`);
    if (next) next.focus({ preventScroll: true }); // its focusin makes it the one to follow
  }).observe(document.body, { childList: true, subtree: true });
}

// Once the page's script run is over (a reveal may compute for seconds after the step changed, and what it draws
// moves the stage), fn runs once.
function whenRunEnds(fn) {
  const app = document.querySelector('[data-testid="stApp"]');
  if (!app) return;
  if (window.alRunEnd) window.alRunEnd.disconnect();
  const observer = (window.alRunEnd = new MutationObserver(() => {
    if (app.dataset.testScriptState !== "notRunning") return;
    observer.disconnect();
    fn();
  }));
  observer.observe(app, { attributes: true, attributeFilter: ["data-test-script-state"] });
}

function showStage(selector, again = true) {
  // after the run's elements are laid out, and again while the stage grows (its heatmaps draw a moment later, and
  // a page shorter than the window cannot scroll as far yet): the stage's top at the window's top
  const stage = document.querySelector(selector);
  if (!stage) return;
  // below the app's top bar (fixed; presenter mode's navigation lives there), not under it
  const header = document.querySelector('[data-testid="stHeader"]');
  stage.style.scrollMarginTop = `${header ? Math.ceil(header.getBoundingClientRect().height) : 0}px`;
  const scroll = () => stage.scrollIntoView({ block: "start", behavior: "instant" });
  requestAnimationFrame(scroll);
  if (window.alStageObserver) window.alStageObserver.disconnect();
  const observer = (window.alStageObserver = new ResizeObserver(scroll));
  observer.observe(stage);
  setTimeout(() => observer.disconnect(), 2000);
  if (again && running()) whenRunEnds(() => showStage(selector, false)); // and again once it is all drawn
}

export default function (component) {
  const { data, parentElement, setTriggerValue } = component;
  let marker = parentElement.querySelector(".al-step-keys");
  const fresh = !marker;
  if (fresh) {
    marker = document.createElement("div");
    marker.className = "al-step-keys";
    parentElement.appendChild(marker);
  }
  window.alStepKeys = (move) => setTriggerValue("move", move);
  window.alStepSlider = (data && data.slider) || null;
  window.alStepHold = Boolean(data && data.hold);
  if (!window.alStepKeysBound) {
    window.alStepKeysBound = true;
    document.addEventListener("keydown", onKey);
    window.addEventListener("keydown", onSliderKey, true); // capture: before the slider's own handler
  }
  keepSliderFocus();
  const step = data && typeof data.step === "number" ? data.step : 0;
  const changed = marker.dataset.step !== undefined && marker.dataset.step !== String(step);
  if (data && data.stage && ((fresh && data.on_open !== false) || changed)) showStage(data.stage);
  marker.dataset.step = String(step);
}
