// A link Streamlit drops whole: a query string of more than 1,000 parameters or 512 Ki characters reaches the script
// as no parameter at all (streamlit.runtime.state.query_params.sanitize_query_string), so only the browser can tell
// the page that it had one. The address the tab was opened with is the navigation's own URL (the page has since
// taken the link's keys out of the address bar). Once a tab: the page draws this only while it read no parameter.
const MAX_FIELDS = 1000;
const MAX_CHARS = 512 * 1024;

export default function (component) {
  const { setTriggerValue } = component;
  if (window.alLinkChecked) return;
  window.alLinkChecked = true;
  const navigation = performance.getEntriesByType("navigation")[0];
  const query = new URL(navigation ? navigation.name : window.location.href).search.slice(1);
  if (!query) return;
  const fields = query.split("&").length; // as Streamlit counts them: one more than the &s
  if (fields > MAX_FIELDS || query.length > MAX_CHARS) setTriggerValue("dropped", { fields, chars: query.length });
}
