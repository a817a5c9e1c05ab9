"""Check what you know: the attention inventory before and after the course, and the learner's gain per idea."""

import ui
from ui.views import inventory

ui.show_url_warnings()
inventory.solo()
ui.finish()
