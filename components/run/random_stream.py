"""Which random stream an app decode draws from, and the line that says so beside the Seed.

The project's rule: batching never changes an answer, and neither does where the decode runs (server or browser).
The page decoder can only draw from the counter stream (rng="counter", s2d2/counter_rng.py: a pure function of the
seed, written the same in Python and JavaScript); torch's generator cannot be reproduced in JavaScript. So every app
decode of a model the page can decode (one with a shipped in-browser export, assets/web/<model>) uses the counter
stream wherever it runs: Run in the page or on the server, the API's Run, Compare's lanes and so their what-if
re-runs. For the same settings and seed the server's answer is then the page's, token for token and decision for
decision. Other models (real checkpoints, decoded on the server only) keep torch's generator, the library's default
and the reference code's, as does the library itself (`DecodeConfig.rng` defaults to "torch").

Invariant: a configuration that names its stream itself (a Compare lane's custom settings "rng=torch") keeps it;
only the default is the app's (`stream_defaults`).
"""
from __future__ import annotations

from typing import Any

from s2d2.config import DecodeConfig

from components.views.lane_keys import lane_short
from components.serve.browser_files import exported_models

COUNTER = "counter"
COUNTER_LINE = ("**Random stream:** the shared counter stream. The seed fixes every random draw (a sampled token, "
                "the acceptance test's coin flip u) the same way in your browser and on the server, so where a Run "
                "decodes never changes its answer.")
TORCH_LINE = ("**Random stream:** torch's random generator, as in the reference code (this model decodes on the server "
              "only).")


def shares_stream(model_name: Any) -> bool:
    """Whether `model_name` is a model the page can decode (it has a shipped export), so its decodes draw from the
    counter stream wherever they run."""
    return isinstance(model_name, str) and model_name in exported_models()


def stream_defaults(model_name: Any) -> dict[str, str]:
    """The app's default for DecodeConfig.rng on this model, as preset overrides: {"rng": "counter"} or {}."""
    return {"rng": COUNTER} if shares_stream(model_name) else {}


def app_config(cfg: DecodeConfig, model_name: Any) -> DecodeConfig:
    """`cfg` as the app decodes it on `model_name`: with the counter stream on a model the page can decode (the
    Run's knobs never set a stream, so theirs is always the library default), unchanged otherwise."""
    defaults = stream_defaults(model_name)
    return DecodeConfig.from_dict({**cfg.to_dict(), **defaults}) if defaults else cfg


def stream_line(model_name: Any) -> str:
    """The plain line under the Seed saying which random stream a Run of `model_name` draws from."""
    return COUNTER_LINE if shares_stream(model_name) else TORCH_LINE


def stream_note(model_name: Any) -> dict[str, str]:
    """The Run tab's handler for a changed model: {"run_stream": its line}."""
    return {"run_stream": stream_line(model_name)}


def streams_line(configs: dict[str, DecodeConfig]) -> str:
    """Which random stream Compare's lanes drew from, in words: one stream for all, or each lane's."""
    words = {COUNTER: "the shared counter stream (the draws a Run of this model makes on the server and in your "
                      "browser alike)", "torch": "torch's random generator"}
    used = {c.rng for c in configs.values()}
    if len(used) == 1:
        return f"Random draws came from {words[used.pop()]}."
    return "Random draws came from " + "; ".join(f"{words[c.rng]} in {lane_short(n)}" for n, c in configs.items()) \
        + "."
