"""Record, decoded where the visitor chose: in the page (components/run/page_decode.py) when "Decode in my browser"
is ticked and the page can, else on the server (components/run/handlers.run). Either way the first update says
where, in one line under Run (`run_where`)."""
from __future__ import annotations

import json
import secrets
from typing import Any, Iterator

from components.run import handlers as r
from components.run.page_decode import plan
from components.views.canvas import render_live

RUN_CHOICE_OUT = [*r.RUN_OUT, "run_where", "page_plan"]
STARTING = ("Starting in your browser: loading the model (the first Run downloads about 9 MB; later ones reuse "
            "it)… Stop ends it.")


def run_choice(prompt: Any, model_name: Any, in_page: Any, page_can: Any, *knobs: Any) -> Iterator[dict[str, Any]]:
    """The page's plan when it decodes this Run (the page then hands back the trace: page_decode.receive), or the
    server's Run streamed as it is. `page_plan` changes on every page Run (a fresh nonce), so the page's decode
    starts each time."""
    if in_page is True:
        page_plan, line = plan(prompt, model_name, page_can, *knobs)
        if page_plan is not None:
            page_plan["nonce"] = secrets.token_hex(8)
            yield {"run_status": STARTING, "live": render_live([]), "output": "", "run_ok": False,
                   "run_final": None, "run_where": line, "page_plan": json.dumps(page_plan)}
            return
    else:
        line = "Decoded on the server (**Decode in my browser** is off)."
    yield {"run_where": line, "page_plan": ""}
    yield from r.run(prompt, model_name, *knobs)
