"""The Metrics & about tab's layout: the metric table (with what each metric means) and the whole-run figures."""
from __future__ import annotations

import gradio as gr

from components.views.step_views import METRIC_HEADERS
from components.ui import Ctx

ABOUT = """
### About the metrics
* **Forwards** (the papers' NFE, number of function evaluations): model calls (prefill + drafts + verifies +
  commits). A 2L verify counts 1 but processes 2B queries; query tokens are listed too.
* **Mean acceptance length** (vLLM's convention) is 1 + accepted / verify calls: vLLM adds a bonus token when every
  draft passes. S2D2 never adds one, so **tokens per verify** = (accepted + resampled) / verify calls is what a
  verify step really commits, and can be lower.
* **Draft acceptance rate** (vLLM): accepted / drafted span tokens. **Per-position acceptance**: #(K > i) / calls,
  and conditional on the span reaching i.
* **Tokens per forward**: generated tokens / forwards. **Verify rate**: verify steps / steps where the policy
  decided.
* **Symbols** used across the app: **τ_conf** the confidence threshold (a diffusion draft with p > τ_conf is
  committed without a check); **K̂** the drafts the estimator expects the verifier to accept; **penalty c** the cost
  of a verify forward in the score **s = K̂ − c** (or K̂ − c·N_hi, N_hi = drafts above τ_conf); **τ_score** the
  score threshold (verify when s ≥ τ_score); **τ_on / τ_off** the hysteresis band; **p** the drafter's probability
  of a draft, **q** the verifier's, **r = min(1, q/p)** the acceptance ratio and **u** the uniform draw (accept
  when u < r). Steps are numbered once, across the whole run, as on the scrubber.
* **Edits** (LLaDA2.x self-correction, editing loop only): decoded tokens the model replaced because it now drafts a
  different token there with p > τ_edit; **edits per token** = edits / generated tokens.

Traces are plain JSON (schema version 1, provenance `measured` or `synthetic`); download one and upload it to replay
it without a model. Paper: Han et al., *S2D2: Fast Decoding for Diffusion LLMs via Training-Free Self-Speculation*
([arXiv 2603.25702](https://arxiv.org/abs/2603.25702)).
"""


def build_metrics_tab(ctx: Ctx, first: dict) -> None:
    """`first`: the opening trace's views (handlers.trace_views), so the tab is filled before any event."""
    ctx["metrics"] = gr.Dataframe(first.get("metrics", []), headers=METRIC_HEADERS,
                                  label="Metrics of the run the Replay tab shows (Compare has its own table)",
                                  interactive=False, wrap=True, elem_id="metrics",
                                  column_widths=["34%", "14%", "52%"])
    with gr.Row():
        ctx["commit_map"] = gr.Plot(first.get("commit_map"), label="Commit map", show_label=False, min_width=320)
        ctx["nfe"] = gr.Plot(first.get("nfe"), label="Forwards per block", show_label=False, min_width=320)
    with gr.Row():
        ctx["hist"] = gr.Plot(first.get("hist"), label="Acceptance histogram", show_label=False, min_width=320)
        ctx["perpos"] = gr.Plot(first.get("perpos"), label="Per-position acceptance", show_label=False,
                                min_width=320)
    gr.Markdown(ABOUT, elem_classes=["s2d2-about"])
