"""The page decoder in Chromium: s2d2_web/worker.js, as a module Web Worker on onnxruntime-web (WASM), decodes the
exported `tiny` and posts a trace equal to `s2d2.generate`'s (float32 torch, CPU), token ids, forwards and every
decision; floats within 1e-4. The repository is served by a plain static server on localhost (the app's serving
of the runtime is components/serve/browser_files.py's, tested there). Skips, saying why, without the runtime
(`npm ci --prefix s2d2_web --ignore-scripts`)."""
from __future__ import annotations

import functools
import http.server
import json
import threading
from typing import Any, Iterator

import pytest
import torch

import s2d2
from tests.support.node_runner import ROOT, WEB
from tests.support.web_decoder import trace_differences

DIST = WEB / "node_modules" / "onnxruntime-web" / "dist"
PROMPT = "Once upon a time there was"

DECODE = """async (request) => {
  const get = async (url) => (await fetch(url)).json();
  request.manifest = await get('/assets/web/tiny/manifest.json');
  request.tokenizer = await get('/assets/web/tiny/tokenizer.json');
  const worker = new Worker('/s2d2_web/worker.js', {type: 'module'});
  const posts = [];
  return await new Promise((done) => {
    worker.onmessage = (event) => {
      posts.push(event.data);
      if (event.data.type !== 'block') { worker.terminate(); done(posts); }
    };
    worker.onerror = (event) => done([{type: 'error', message: String(event.message)}]);
    worker.postMessage(request);
  });
}"""


class _Files(http.server.SimpleHTTPRequestHandler):
    extensions_map = {**http.server.SimpleHTTPRequestHandler.extensions_map, ".mjs": "text/javascript",
                      ".js": "text/javascript", ".wasm": "application/wasm"}

    def log_message(self, *args: Any) -> None:  # quiet
        pass


@pytest.fixture(scope="module")
def origin() -> Iterator[str]:
    if not (DIST / "ort.wasm.min.mjs").is_file():
        pytest.skip("onnxruntime-web is not installed: run `npm ci --prefix s2d2_web --ignore-scripts`")
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Files, directory=str(ROOT)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


@pytest.mark.parametrize("name,temperature,tokens", [("sdar-config-b", 0.0, 32), ("fastdllm-config-c", 1.0, 32),
                                                     ("d2f-s2d2", 1.0, 64)])  # the D2F pipeline: two blocks of 32
def test_the_worker_decodes_in_chromium_as_generate_does(browser, origin, name, temperature, tokens):
    cfg = s2d2.preset(name, gen_length=tokens, rng="counter", temperature=temperature)
    want = s2d2.generate(s2d2.load_model("tiny", dtype=torch.float32), PROMPT, cfg, seed=7).trace.to_dict()
    h = want["header"]
    page = browser.new_page()
    page.goto(f"{origin}/s2d2_web/package.json")  # the page's origin: the worker and the files come from it
    posts = page.evaluate(DECODE, {"ortUrl": "/s2d2_web/node_modules/onnxruntime-web/dist/ort.wasm.min.mjs",
                                   "modelUrl": "/assets/web/tiny/model.onnx", "promptIds": h["prompt_ids"],
                                   "promptText": h["prompt_text"], "config": h["config"], "seed": 7})
    page.close()
    assert posts[-1]["type"] == "done", posts[-1]
    assert [p["type"] for p in posts[:-1]] == ["block"] * (len(posts) - 1) and len(posts) > 1
    got = posts[-1]["trace"]
    assert got["header"]["model"]["attn_implementation"] == "onnxruntime"
    got["header"]["model"] = want["header"]["model"]
    assert trace_differences(want, got) == []
    assert json.dumps(got["footer"]["output_ids"]) == json.dumps(want["footer"]["output_ids"])
