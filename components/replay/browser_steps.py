"""Replay's stepping runs in the visitor's browser: the event code that calls the ES modules of components/replay/js/.

The modules are served as static files (components/serve/page_modules.py) and imported by the
events' browser code on first use (a dynamic import, cached by the browser): the slider's change draws the step from
the frame bundle (stepper.js), Play runs a browser timer (play.js). Neither sends anything to the server; the
stepper hands a step to the server only for a pinned token or a step past the bundle (stepper.js says why).
"""
from __future__ import annotations

from components.serve.page_modules import REPLAY_JS, module_url

# The views that follow the scrubber, in the order of stepper.js's STEPPED (a test holds the two equal); the
# stepper's outputs are these and then "server_step".
STEPPED = ["canvas", "strip", "step_words", "summary", "routing", "detail", "residual", "mask"]


# Inputs: the scrubber value, the bundle, then the STEPPED views on screen; outputs: STEPPED, then "server_step".
# The step drawn is the scrubber's value on screen when this code runs (SCRUBBER_NOW), not the value the event was
# sent with: two of these events can finish out of order (each first waits for the page to gather its inputs), and
# one sent for an older value, finishing last, left the views a step behind the scrubber for good (seen in CI: a
# link's step landing as the visitor pressed ▶). Whichever finishes last now draws what the scrubber shows.
SCRUBBER_NOW = "document.querySelector('#step-slider input[type=number]')"
STEP_JS = f"""async (value, bundle, ...shown) => {{
  const m = await import({module_url(REPLAY_JS, 'stepper.js')});
  const box = {SCRUBBER_NOW};
  return m.stepOutputs(box ? box.value : value, bundle, shown);
}}"""

# Inputs: the Play button's label, the speed, the scrubber value; outputs: the label, the scrubber value.
PLAY_JS = f"""async (label, speed, step) => {{
  const m = await import({module_url(REPLAY_JS, 'play.js')});
  return m.togglePlay(label, speed, step);
}}"""
