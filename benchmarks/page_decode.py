"""The page decoder's speed in Chromium against the server's decode on the same machine.

    python -m benchmarks.page_decode [--presets sdar-config-b,ar] [--repeat 3]

For each preset it decodes the default prompt with `tiny` two ways: `s2d2.generate` on torch (float32, CPU, one
thread), and s2d2_web/worker.js in headless Chromium on onnxruntime-web's WASM build (one thread). The page's
numbers: the worker's session start (model fetch, unpack and session creation: the time from posting the request to
the decode's start), its decode time (the trace's own wall_s) and the median forward latency per kind (each forward's
wall_s in the trace). Also whether the page's output equals the server's. Needs Chromium, playwright and
`npm ci --prefix s2d2_web --ignore-scripts`. Reports the load average so a busy machine is visible.
"""
from __future__ import annotations

import argparse
import functools
import http.server
import os
import statistics
import threading
import time
from pathlib import Path
from typing import Any

import torch

import s2d2

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = os.environ.get("S2D2_CHROMIUM", "/usr/bin/chromium")
PROMPT = "Tom has 3 apples. He buys 4 more. How many apples does he have?"

DECODE = """async (request) => {
  const get = async (url) => (await fetch(url)).json();
  request.manifest = await get('/assets/web/tiny/manifest.json');
  request.tokenizer = await get('/assets/web/tiny/tokenizer.json');
  const worker = new Worker('/s2d2_web/worker.js', {type: 'module'});
  const t0 = performance.now();
  return await new Promise((done) => {
    worker.onmessage = (event) => {
      if (event.data.type === 'block') return;
      worker.terminate();
      done({...event.data, total_s: (performance.now() - t0) / 1000});
    };
    worker.onerror = (event) => done({type: 'error', message: String(event.message)});
    worker.postMessage(request);
  });
}"""


class _Files(http.server.SimpleHTTPRequestHandler):
    extensions_map = {**http.server.SimpleHTTPRequestHandler.extensions_map, ".mjs": "text/javascript",
                      ".js": "text/javascript", ".wasm": "application/wasm"}

    def log_message(self, *args: Any) -> None:
        pass


def page_decode(page: Any, cfg: dict[str, Any], ids: list[int], seed: int) -> dict[str, Any]:
    """One decode in a fresh worker: {trace, total_s} (or an error)."""
    return page.evaluate(DECODE, {"ortUrl": "/s2d2_web/node_modules/onnxruntime-web/dist/ort.wasm.min.mjs",
                                  "modelUrl": "/assets/web/tiny/model.onnx", "promptIds": ids, "config": cfg,
                                  "seed": seed})


def per_kind(trace: dict[str, Any]) -> dict[str, float]:
    """Median forward wall time per kind, in milliseconds."""
    kinds: dict[str, list[float]] = {}
    for f in trace["forwards"]:
        kinds.setdefault(f["kind"], []).append(f["wall_s"] * 1000)
    return {k: statistics.median(v) for k, v in kinds.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--presets", default="ar,dynamic-baseline,sdar-config-b,sdar-config-b+reuse+fused+trim,lossless")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    from playwright.sync_api import sync_playwright

    torch.set_num_threads(1)
    model = s2d2.load_model("tiny", dtype=torch.float32)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Files, directory=str(ROOT)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores; prompt {PROMPT!r}, gen_length 64")
    print("preset | server decode s | page session start s | page decode s | page forward ms by kind | same output")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page()
        page.goto(f"http://127.0.0.1:{server.server_address[1]}/s2d2_web/package.json")
        for name in args.presets.split(","):
            cfg = s2d2.preset(name, gen_length=64, rng="counter")
            server_s, starts, decodes, kinds, same = [], [], [], {}, True
            for _ in range(args.repeat):
                t0 = time.perf_counter()
                want = s2d2.generate(model, PROMPT, cfg, seed=1).trace
                server_s.append(time.perf_counter() - t0)
                got = page_decode(page, want.header.config, want.header.prompt_ids, 1)
                if got.get("type") != "done":
                    raise SystemExit(f"{name}: {got.get('message')}")
                trace = got["trace"]
                decodes.append(trace["footer"]["wall_s"])
                starts.append(got["total_s"] - trace["footer"]["wall_s"])
                kinds = per_kind(trace)
                same &= trace["footer"]["output_ids"] == want.footer.output_ids
            kind_text = ", ".join(f"{k} {v:.1f}" for k, v in sorted(kinds.items()))
            print(f"{name} | {statistics.median(server_s):.3f} | {statistics.median(starts):.2f} | "
                  f"{statistics.median(decodes):.3f} | {kind_text} | {same}")
        browser.close()
    server.shutdown()


if __name__ == "__main__":
    main()
