"""`python -m benchmarks.page_run`: the Run tab's "Decode in my browser" in Chromium against the server's decode.

Starts the app (benchmarks/server.py) on loopback, opens it in Debian's Chromium (Playwright) with an empty cache,
and presses Run with the default prompt and preset --runs times, each decoded in the page (a Web Worker running
onnxruntime-web 1.30.0, WASM, one thread). It prints:

- the bytes the first in-browser Run downloads (compressed, as on the wire: the packed runtime and model, the
  tokenizer, the manifest, the decoder's modules), and the later Runs' (the browser's cache);
- the session start each Run (the worker's "Model loaded in T s": runtime start, fetch, unpack, checksum, session);
- per-forward latency by kind (median and fastest, from the forwards' own wall times in the trace the page sent);
- the default prompt's decode time (the trace's wall_s) in the page against the server's (s2d2.generate on the
  same prompt, settings and seed, in this process, one thread as the app decodes), --runs times each;
- the machine's load (`uptime`) before and after: read every figure against it.

benchmarks/page_decode.py measures the worker alone (no app); this one measures what a visitor's Run does.
Measuring only: nothing is asserted. Needs the bundled tiny model, its export (assets/web/tiny) and the runtime
(npm ci --prefix s2d2_web --ignore-scripts).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

from benchmarks.server import free_port, start_server, stop_server

CHROMIUM = "/usr/bin/chromium"
LOADED = re.compile(r"Model loaded in ([\d.]+) s")
# Keep the worker's "Model loaded in T s" line once seen (the page replaces it as the decode goes on).
WATCH = """() => {
  window.s2d2Loaded = [];
  new MutationObserver(() => {
    const p = document.querySelector('#run-status .s2d2-page-progress');
    if (p && p.textContent.startsWith('Model loaded') && !window.s2d2Loaded.includes(p.textContent))
      window.s2d2Loaded.push(p.textContent);
  }).observe(document.body, {subtree: true, childList: true, characterData: true});
}"""


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()


def by_kind(forwards: list[dict]) -> dict[str, list[float]]:
    out: dict[str, list[float]] = defaultdict(list)
    for f in forwards:
        out[f["kind"]].append(float(f["wall_s"]))
    return out


def run_tab(pg) -> None:
    """Show the Run tab (a click before the page has wired its tabs is lost: clicked again until Run shows)."""
    for _ in range(10):
        pg.get_by_role("tab", name="Run", exact=True).click()
        try:
            pg.locator("#run").wait_for(state="visible", timeout=5000)
            return
        except Exception:  # playwright's TimeoutError: not shown yet
            continue
    raise RuntimeError("the Run tab never showed its Run button")


def page_runs(url: str, runs: int, upload_dir: Path, wait_s: float) -> tuple[list[dict], list[tuple], list[float]]:
    """Press Run `runs` times in one fresh page; the traces the server received, what each Run downloaded (the
    compressed body bytes of the served files, their count, and the bytes of every response including the Run's
    and Replay's server events) and each Run's session start."""
    from playwright.sync_api import sync_playwright

    traces, downloads, starts = [], [], []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        context = browser.new_context(viewport={"width": 1366, "height": 900})
        pg = context.new_page()
        pg.goto(url)
        pg.wait_for_selector("#canvas .s2d2-canvas", timeout=wait_s * 1000)
        pg.evaluate(WATCH)
        pg.get_by_role("tab", name="Run", exact=True).click()
        finished: list = []

        def on_finished(request) -> None:
            finished.append(request)

        context.on("requestfinished", on_finished)
        for i in range(runs):
            mark = len(finished)
            before = set(upload_dir.rglob("page-trace.json"))
            run_tab(pg)
            pg.locator("#run").click()
            pg.wait_for_function(f"document.querySelectorAll('#run-status').length && "
                                 f"document.querySelector('#run-status').innerText.includes('Done in your browser')"
                                 f" && window.s2d2Loaded.length >= {i + 1}", timeout=wait_s * 1000)
            files = [r for r in finished[mark:] if "/gradio_api/file=" in r.url]  # the decoder, runtime and model
            downloads.append((sum(max(0, r.sizes()["responseBodySize"]) for r in files), len(files),
                              sum(max(0, r.sizes()["responseBodySize"]) for r in finished[mark:])))
            new = sorted(set(upload_dir.rglob("page-trace.json")) - before, key=lambda q: q.stat().st_mtime)
            traces.append(json.loads(new[-1].read_text(encoding="utf-8")))
            starts.append(float(LOADED.search(pg.evaluate("window.s2d2Loaded")[i]).group(1)))
        browser.close()
    return traces, downloads, starts


def server_runs(trace: dict, runs: int) -> list[dict]:
    """The server's decode of the page's prompt, settings and seed, `runs` times (one thread, as the app)."""
    import torch

    import s2d2

    torch.set_num_threads(1)
    h = trace["header"]
    model = s2d2.load_model(h["model"]["name"])
    cfg = s2d2.DecodeConfig.from_dict(h["config"])
    s2d2.generate(model, h["prompt_ids"], cfg, h["seed"])  # warm-up (first-call allocations), not counted
    return [s2d2.generate(model, h["prompt_ids"], cfg, h["seed"]).trace.to_dict() for _ in range(runs)]


def kind_table(page: list[dict], server: list[dict]) -> list[str]:
    pk = by_kind([f for t in page for f in t["forwards"]])
    sk = by_kind([f for t in server for f in t["forwards"]])
    lines = ["| forward kind | page: median / fastest (ms) | server: median / fastest (ms) | per decode |",
             "|---|---|---|---|"]
    for kind in sorted(pk, key=lambda k: -len(pk[k])):
        p, s = pk[kind], sk.get(kind, [])
        srv = f"{1e3 * statistics.median(s):.1f} / {1e3 * min(s):.1f}" if s else "—"
        lines.append(f"| {kind} | {1e3 * statistics.median(p):.1f} / {1e3 * min(p):.1f} | {srv} | "
                     f"{len(p) // len(page)} |")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=3, help="Runs in the page and on the server (1-10)")
    ap.add_argument("--wait-s", type=float, default=600.0, help="the longest a page Run may take (bounded)")
    args = ap.parse_args(argv)
    runs = max(1, min(10, args.runs))
    wait_s = max(30.0, min(1800.0, args.wait_s))
    if not Path(CHROMIUM).exists():
        print(f"no Chromium at {CHROMIUM}", file=sys.stderr)
        return 2
    print(f"load before: {uptime()}")
    tmp = Path(tempfile.mkdtemp(prefix="page-decode-"))
    port = free_port()
    proc = start_server(port, {"GRADIO_TEMP_DIR": str(tmp), "S2D2_MODELS": "tiny,tiny-llada2"})
    try:
        page, downloads, starts = page_runs(f"http://127.0.0.1:{port}/", runs, tmp, wait_s)
    finally:
        stop_server(proc)
    server = server_runs(page[0], runs)
    same = all(t["footer"]["output_ids"] == server[0]["footer"]["output_ids"] for t in page)
    first, files, everything = downloads[0]
    print(f"first in-browser Run downloads (compressed, on the wire): {first:,} bytes ({first / 1e6:.2f} MB) in "
          f"{files} files; {everything:,} bytes with the server's events (the Run's views, Replay's frames)")
    print(f"later Runs (the browser's cache): files {', '.join(f'{d[0]:,}' for d in downloads[1:]) or '—'} bytes; "
          f"with events {', '.join(f'{d[2]:,}' for d in downloads[1:]) or '—'}")
    print(f"session start (runtime + model fetched, unpacked, checked, session created), each Run: "
          f"{', '.join(f'{s:.1f} s' for s in starts)}")
    print(f"default prompt, {page[0]['header']['config'].get('method')} preset config, "
          f"{len(page[0]['forwards'])} forwards; same output ids page vs server: {same}")
    pw = [t["footer"]["wall_s"] for t in page]
    sw = [t["footer"]["wall_s"] for t in server]
    print(f"decode time in the page:   median {statistics.median(pw):.3f} s, fastest {min(pw):.3f} s ({runs} runs)")
    print(f"decode time on the server: median {statistics.median(sw):.3f} s, fastest {min(sw):.3f} s ({runs} runs)")
    print("\n".join(kind_table(page, server)))
    print(f"load after: {uptime()}")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    sys.exit(main())
