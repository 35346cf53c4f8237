"""The page's way to the model (s2d2_web/web_files.js with onnxruntime-web's WASM-only bundle, the files the app
serves gzip-packed) run under Node: the shipped `tiny` export gives torch's logits within 1e-4 on a prefill, a draft
and a 2L verify chained through the cache the page keeps; a file that does not match its manifest is refused.

Skips (saying why) where Node or the pinned runtime (`npm ci --prefix s2d2_web --ignore-scripts`) is missing;
.ci/run installs both."""
from __future__ import annotations

import json

import pytest
import torch

from components.serve import browser_files as bf
from s2d2.models.masks import block_causal_mask, draft_mask, verify_2l_mask
from s2d2.web.manifest import FORMAT
from tests.support.node_runner import WEB, run_module

TOL = 1e-4

# Test-only JavaScript: run the chain as the page's decoder will (feeds by the manifest's names, keep the first
# past + keep positions of every present tensor).
CHAIN = """
const ort = await import(input.ort);
await m.startRuntime(ort, input.wasm, read);
const { manifest, session } = await m.loadModel(ort, input.manifest, input.model, read);
const a = manifest.architecture, names = manifest.graph.inputs.map((i) => i.name);
let past = 0, cache = names.slice(3).map(() => new Float32Array(0));
const crop = (data, total, keepLen) => {  // [1, kv_heads, total, head_dim] -> [1, kv_heads, keepLen, head_dim]
  const out = new Float32Array(a.kv_heads * keepLen * a.head_dim), row = a.head_dim;
  for (let h = 0; h < a.kv_heads; h++) out.set(data.subarray(h * total * row, (h * total + keepLen) * row), h * keepLen * row);
  return out;
};
output = [];
for (const f of input.forwards) {
  const q = f.ids.length, feeds = {
    [names[0]]: new ort.Tensor('int64', BigInt64Array.from(f.ids.map(BigInt)), [1, q]),
    [names[1]]: new ort.Tensor('int64', BigInt64Array.from(f.positions.map(BigInt)), [1, q]),
    [names[2]]: new ort.Tensor('bool', Uint8Array.from(f.mask), [1, 1, q, past + q]),
  };
  names.slice(3).forEach((n, i) => { feeds[n] = new ort.Tensor('float32', cache[i], [1, a.kv_heads, past, a.head_dim]); });
  const out = await session.run(feeds);
  cache = manifest.graph.outputs.slice(1).map((o) => crop(out[o.name].data, past + q, past + f.keep));
  past += f.keep;
  output.push(Array.from(out.logits.data));
}
"""
READ = "import { readFileSync as rf } from 'node:fs';\nconst read = async (p) => new Uint8Array(rf(p));\n"


@pytest.fixture(scope="module")
def runtime(tmp_path_factory):
    """Paths the Node side reads: the WASM-only bundle, the packed WASM binary, tiny's manifest and packed graph."""
    why = bf.runtime_problem()
    if why:
        pytest.skip(f"in-browser runtime unavailable: {why}")
    into = tmp_path_factory.mktemp("packed")
    found = bf.find(into=into)
    tiny = {f.name: f for f in found.models["tiny"]}
    return {"ort": (bf.RUNTIME_DIST / "ort.wasm.min.mjs").as_uri(), "wasm": str(found.runtime[-1]),
            "manifest": str(tiny["manifest.json"]), "model": str(tiny["model.onnx.gz"])}


def forwards(hf):
    """A prefill, a draft and a 2L verify as the block loop makes them (block 4), with torch's logits."""
    from s2d2.api import encode_prompt

    prompt, _ = encode_prompt(hf, "What is 12 + 7?")
    n, B, mask_id = len(prompt), 4, hf.spec.mask_id
    plan = [(prompt, list(range(n)), block_causal_mask(n, B), n),
            ([mask_id] * B, list(range(n, n + B)), draft_mask(n, B, 0), 0),
            ([5, 6, 7, 8] + [mask_id] * B, list(range(n, n + B)) * 2, verify_2l_mask(n, B), 0)]
    cache, out = hf.new_cache(), []
    for ids, positions, mask, keep in plan:
        logits = hf.forward(cache, torch.tensor(ids), torch.tensor(positions), mask, keep)
        out.append(({"ids": ids, "positions": positions, "mask": mask.flatten().int().tolist(), "keep": keep}, logits))
    return out


def test_the_page_runtime_gives_torchs_logits(runtime):
    from s2d2.models.loading import load_model

    hf = load_model("tiny", device="cpu", dtype="float32", backend="dynamic")
    plan = forwards(hf)
    got = run_module(WEB / "web_files.js", READ + CHAIN, {**runtime, "forwards": [f for f, _ in plan]}, timeout=300)
    assert len(got) == len(plan)
    for (f, ref), values in zip(plan, got):
        logits = torch.tensor(values).view(len(f["ids"]), -1)
        assert float((logits - ref).abs().max()) <= TOL
        assert torch.equal(logits.argmax(-1), ref.argmax(-1))


def test_a_file_unlike_its_manifest_is_refused(runtime, tmp_path):
    manifest = json.loads(open(runtime["manifest"]).read())
    assert manifest["format"] == FORMAT  # the JavaScript checks the same name
    body = ("const manifest = input.manifest; const out = [];\n"
            "try { await m.checkFile(manifest, 'model.onnx', new Uint8Array([1, 2, 3])); out.push('ok'); }\n"
            "catch (e) { out.push(String(e.message)); }\n"
            "const other = new Uint8Array(32); output = [out[0], await m.sha256Hex(other)];")
    message, digest = run_module(WEB / "web_files.js", body, {"manifest": manifest})
    assert message.startswith("model.onnx: 3 bytes with sha256 039058c6f2c0…, the manifest says ")
    assert digest == __import__("hashlib").sha256(bytes(32)).hexdigest()
    other = dict(manifest, format="something-else/9")
    (tmp_path / "m.json").write_text(json.dumps(other))
    body = READ + ("const ort = await import(input.ort);\ntry { await m.loadModel(ort, input.manifest, input.model, "
                   "read); output = 'loaded'; } catch (e) { output = String(e.message); }")
    got = run_module(WEB / "web_files.js", body, {**runtime, "manifest": str(tmp_path / "m.json")})
    assert got == f"{tmp_path / 'm.json'}: not an s2d2-web-model/1 manifest"
