"""The self-contained HTML replay: page size and build time per trace (not a test).

    python benchmarks/html_export.py

Rows: every shipped example trace (and its baseline partner), a 512-token synthetic S2D2 trace at B = 16
(tests/trace_factory.large), the largest recording the app makes (tests/upload_fuzz.legit_trace: a 2048-token
prompt, 512 generated tokens at B = 64, one step per token, 14 MB of trace JSON) and the heaviest trace an upload
may hold (upload_fuzz.worst_trace), and an editing-loop trace of the issue-29 shape (`editing_trace`: B = 1,
max_post_steps 64, 355 generated tokens, 23,075 steps). For each: steps, frames kept under the bounds, page size,
its ratio to the trace JSON, the build time (CPU time of this thread, best of `--repeat`; wall time too, noisy on a
shared machine), and the CPU time of exporting the same content again (the cache: another opening step).
`--only WORD` keeps the rows whose name contains WORD.
"""
from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

import trace_factory as tf  # noqa: E402
import upload_fuzz as uf  # noqa: E402

from components.html_export import MAX_HTML_BYTES, clear_cache, replay_html  # noqa: E402
from components.traces_io import load_example  # noqa: E402
from s2d2.limits import limits  # noqa: E402


def editing_trace(gen: int = 355, post: int = 64):
    """Example 08's header and model, re-blocked at B = 1 with `post` editing steps after every commit (the first
    two edit the token and back): (gen x (post + 1)) steps over (34 + gen) positions. It passes the validator; its
    JSON (9 MB) is over the upload bound, the step count and positions (what the export's cost grows with) are
    those of the 5.18 MB upload the probe used (23,090 steps)."""
    from s2d2.trace import BlockRecord, Candidate, Commit, Edit, ForwardRecord, MaskDraft, StepRecord, Trace

    base = load_example(ROOT / "assets" / "traces" / "08-editing-fixes-a-wrong-digit--LLaDA2.json")
    prompt, total = len(base.header.prompt_ids), len(base.header.prompt_ids) + gen
    header = dataclasses.replace(base.header, config={**base.header.config, "block_length": 1, "gen_length": gen,
                                                      "max_post_steps": post}, gen_length=gen, total_length=total)
    forwards = [ForwardRecord(0, "prefill", -1, -1, 0, prompt, prompt, 1, 0.001)]
    blocks, steps = [], []
    for p in range(prompt, total):
        blocks.append(BlockRecord(p, p, 1, 0, ""))
        for k in range(post + 1):
            forwards.append(ForwardRecord(len(forwards), "draft", p, k, p, 1, 1, len(forwards) + 1, 0.001))
            fwd = [len(forwards) - 1]
            if k == 0:
                draft = MaskDraft(p, 20, "1", 0.9, 0.1, 0.8, [Candidate(20, "1", 0.9)])
                steps.append(StepRecord(len(steps), p, 0, [p, p + 1], fwd, [p], [draft], [p, 1], None, None, None, 1,
                                        [Commit(p, 20, "1", "threshold")]))
                continue
            edits = {1: [Edit(p, 20, "1", 21, "2", 0.6)], 2: [Edit(p, 21, "2", 20, "1", 0.6)]}.get(k, [])
            steps.append(StepRecord(len(steps), p, k, [p, p + 1], fwd, [], [], [p, 0], None, None, None, 0, [], None,
                                    edits))
    footer = dataclasses.replace(base.footer, output_ids=[20] * gen, output_text="1" * gen, output_tokens=["1"] * gen,
                                 generated_length=gen, stop_position=gen)
    return Trace(header, blocks, forwards, steps, footer)


def measure(name: str, trace, repeat: int) -> str:
    best_cpu = best_wall = float("inf")
    page = None
    for _ in range(repeat):
        trace.__dict__.pop("_s2d2_index", None)  # build the lookup tables again, as a fresh load does
        trace.__dict__.pop("_s2d2_content_key", None)  # and the content digest
        clear_cache()
        c0, w0 = time.thread_time(), time.perf_counter()
        page = replay_html(trace)
        best_cpu = min(best_cpu, time.thread_time() - c0)
        best_wall = min(best_wall, time.perf_counter() - w0)
    c0 = time.thread_time()
    replay_html(trace, 0)  # the same content again, opened at another step: from the cache
    again = time.thread_time() - c0
    json_kb = len(trace.to_json()) / 1000
    return (f"| {name} | {len(trace.steps)} | {page.frames} | {page.size / 1000:,.0f} kB | "
            f"{page.size / 1000 / json_kb:.2f} | {best_cpu:.2f} s | {best_wall:.2f} s | {again:.2f} s |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--only", default="", help="keep the rows whose name contains this")
    args = ap.parse_args()
    print(f"bound: {MAX_HTML_BYTES / 2**20:g} MiB ({MAX_HTML_BYTES:,} bytes)\n")
    print("| trace | steps | frames | page | page / trace JSON | build CPU | build wall | again (cached) CPU |")
    print("|---|---|---|---|---|---|---|---|")
    rows = [(path.stem, lambda p=path: load_example(p), args.repeat)
            for path in sorted((ROOT / "assets" / "traces").glob("*.json"))]
    rows += [("synthetic 512 tokens, B = 16", tf.large, args.repeat),
             ("largest recording (legit_trace)", uf.legit_trace, 1),
             ("heaviest upload (worst_trace)", lambda: uf.worst_trace(limits().max_upload_bytes), 1),
             ("editing loop, B = 1, 64 post steps (editing_trace)", editing_trace, 1)]
    for name, make, repeat in rows:
        if args.only in name:
            print(measure(name, make(), repeat), flush=True)


if __name__ == "__main__":
    main()
