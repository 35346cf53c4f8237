"""`python -m s2d2 export-web` (s2d2/web/): the exported graph against torch on every forward kind the decoder uses
and on whole decodes, the manifest against the model, the exact weight storage, and bad input as one line.

Each bundled model is exported once per session into a temporary folder (seconds), never over assets/web/."""
from __future__ import annotations

import json
import shutil
import struct

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="export-web needs requirements-web.txt (onnx, onnxruntime)")
pytest.importorskip("onnxruntime", reason="export-web needs requirements-web.txt (onnx, onnxruntime)")

from s2d2.__main__ import main  # noqa: E402
from s2d2.models.onnx_forward import input_names, output_names  # noqa: E402
from s2d2.web import roundtrip  # noqa: E402
from s2d2.web.export import export_web, trace  # noqa: E402
from s2d2.web.manifest import FORMAT, sha256  # noqa: E402
from s2d2.web.onnx_model import OnnxModel  # noqa: E402
from s2d2.web.storage import compact, is_bfloat16_exact  # noqa: E402

MODELS = ("tiny", "tiny-llada2")
LOGIT_TOL = 1e-4  # float32 kernels of two runtimes: measured <= 2.3e-5 on both models (docs/browser-decoding.md)


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """{name: (export folder, manifest, the float32 HFModel)} for both bundled models."""
    from s2d2.models.loading import load_model

    out = {}
    for name in MODELS:
        done = export_web(name, tmp_path_factory.mktemp(name))
        hf = load_model(name, device="cpu", dtype="float32", backend="dynamic")
        out[name] = (done.folder, done.manifest, hf)
    return out


@pytest.mark.parametrize("name", MODELS)
def test_every_forward_kind_matches_torch(exported, name):
    folder, _, hf = exported[name]
    rows = roundtrip.forward_kinds(hf, OnnxModel(folder, hf.tokenizer), block=min(hf.spec.default_block, 8))
    kinds = {r.kind for r in rows}
    assert {"prefill", "draft", "verify_2l", "commit", "commit+draft", "ar", "prefill (causal)"} <= kinds
    assert any(r.cache == 0 for r in rows) and any(r.cache > 0 for r in rows)  # an empty cache and a grown one
    for r in rows:
        assert r.max_abs <= LOGIT_TOL and r.cache_max_abs <= LOGIT_TOL, r
        assert r.argmax_equal == r.rows, r  # every row that is not a near-tie picks the same token
        assert r.near_ties <= 1, r  # the script's inputs are not built to tie; one is chance, many a bug


@pytest.mark.parametrize("name, presets", [
    ("tiny", ["sdar-config-a", "sdar-config-b", "sdar-config-b+all", "lossless", "ar", "dynamic-baseline",
              "fastdllm-config-a"]),
    ("tiny-llada2", ["llada2-dynamic-edit", "llada2-conservative", "llada2-quality"]),
])
def test_whole_decodes_match_torch(exported, name, presets):
    """s2d2.generate on the exported graph gives torch's tokens and the same forwards (kind, cache length, queries)."""
    folder, _, hf = exported[name]
    rows = roundtrip.decodes(hf, OnnxModel(folder, hf.tokenizer), presets, ["What is 12 + 7?", "Count to five."])
    assert all(r.same_ids and r.same_forwards for r in rows), [r for r in rows if not (r.same_ids and r.same_forwards)]
    assert all(r.tokens > 0 and r.forwards > 1 for r in rows)


@pytest.mark.parametrize("name", MODELS)
def test_manifest_says_what_the_model_is(exported, name):
    folder, manifest, hf = exported[name]
    config, spec = hf.model.config, hf.spec
    assert manifest["format"] == FORMAT and manifest["model"] == name
    assert manifest["decoding"] == {
        "mask_id": spec.mask_id, "stop_ids": list(spec.stop_ids), "block_size": spec.default_block,
        "alignment": spec.alignment, "verifier": spec.verifier, "vocab_size": int(config.vocab_size),
        "max_positions": int(config.max_position_embeddings), "use_chat_template": spec.use_chat_template}
    arch = manifest["architecture"]
    assert (arch["layers"], arch["heads"], arch["kv_heads"], arch["head_dim"], arch["hidden_size"]) == (
        config.num_hidden_layers, config.num_attention_heads, config.num_key_value_heads, config.head_dim,
        config.hidden_size)
    assert ("experts" in arch) == (name == "tiny-llada2")
    assert manifest["parameters"] == sum(p.numel() for p in hf.model.parameters())
    layers = arch["layers"]
    graph = manifest["graph"]
    assert [i["name"] for i in graph["inputs"]] == input_names(layers)
    assert [o["name"] for o in graph["outputs"]] == output_names(layers)
    assert graph["inputs"][2] == {"name": "attention_mask", "dtype": "bool", "shape": [1, 1, "queries", "total"]}
    assert graph["inputs"][3]["shape"] == [1, arch["kv_heads"], "past", arch["head_dim"]]
    assert graph["outputs"][0] == {"name": "logits", "dtype": "float32", "shape": [1, "queries", config.vocab_size]}
    assert manifest["tokenizer"]["chat_template"] == hf.tokenizer.chat_template
    source = hf.spec.extra["folder"]
    for file, facts in manifest["source"].items():
        assert facts["sha256"] == sha256(__import__("pathlib").Path(source) / file)
    for file, facts in manifest["files"].items():
        assert facts == {"bytes": (folder / file).stat().st_size, "sha256": sha256(folder / file)}


@pytest.mark.parametrize("name", MODELS)
def test_bfloat16_storage_is_bit_exact_and_half_the_size(exported, name):
    """The compacted graph's outputs equal the float32 graph's bit for bit; its weights take about half the bytes."""
    import onnxruntime as ort

    _, _, hf = exported[name]
    plain = trace(hf.model)
    small = onnx.ModelProto()
    small.CopyFrom(plain)
    report = compact(small)
    assert report.bfloat16 > 0 and report.tied == 1 and report.bytes_after < 0.5 * report.bytes_before
    sessions = [ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]) for m in (plain, small)]
    rng = np.random.default_rng(0)
    cfg = hf.model.config
    for past, q in ((0, 5), (7, 3), (12, 1)):
        feeds = {"input_ids": rng.integers(0, cfg.vocab_size, (1, q)), "position_ids": np.arange(past, past + q)[None],
                 "attention_mask": rng.random((1, 1, q, past + q)) < 0.7}
        feeds["attention_mask"][..., past:] |= np.eye(q, dtype=bool)
        for i in sessions[0].get_inputs()[3:]:
            feeds[i.name] = rng.standard_normal((1, cfg.num_key_value_heads, past, cfg.head_dim)).astype(np.float32)
        a, b = (s.run(None, feeds) for s in sessions)
        assert all(np.array_equal(x, y) for x, y in zip(a, b))


def test_bfloat16_exactness_is_decided_per_tensor():
    assert is_bfloat16_exact(np.array([1.0, -0.5, 3.140625, 0.0], dtype=np.float32))
    assert not is_bfloat16_exact(np.array([1.0, 1.0 + 2**-10], dtype=np.float32))  # needs more than 8 bits
    weight = np.array([[1.0, 1.0 + 2**-10]], dtype=np.float32)
    x = onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 1])
    y = onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, 2])
    graph = onnx.helper.make_graph([onnx.helper.make_node("MatMul", ["x", "w"], ["y"])], "g", [x], [y],
                                   [onnx.numpy_helper.from_array(weight, "w")])
    model = onnx.helper.make_model(graph)
    report = compact(model)
    assert (report.bfloat16, report.float32) == (0, 1)  # kept as float32: bfloat16 would round it


def run(argv, capsys):
    try:
        code = main(argv)
    except SystemExit as exc:
        code = exc.code
    return code, capsys.readouterr().err


def fake_checkpoint(folder, params):
    """A folder whose safetensors header lists `params` bfloat16 parameters (no tensor data: only the header is read
    before the refusal)."""
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "qwen3"}))
    header = json.dumps({"w": {"dtype": "BF16", "shape": [params], "data_offsets": [0, 2 * params]}}).encode()
    (folder / "model.safetensors").write_bytes(struct.pack("<Q", len(header)) + header)
    return folder


@pytest.mark.parametrize("argv, message", [
    (["export-web", "--model", "no-such-model", "--out", "{tmp}/o"], "error: unknown model 'no-such-model'"),
    (["export-web", "--model", "someone/some-model", "--out", "{tmp}/o"],
     "error: unknown model 'someone/some-model': export-web takes tiny, tiny-llada2 or a local checkpoint folder"),
    (["export-web", "--model", "JetLM/SDAR-1.7B-Chat", "--out", "{tmp}/o"],
     "error: JetLM/SDAR-1.7B-Chat has about 2,030 M parameters; export-web takes checkpoints of at most 50 M"),
    (["export-web", "--model", "{tmp}/big", "--out", "{tmp}/o"],
     "error: {tmp}/big has about 60 M parameters; export-web takes checkpoints of at most 50 M"),
    (["export-web", "--model", "{tmp}/garbled", "--out", "{tmp}/o"], "error: model.safetensors: header of"),
    (["export-web", "--model", "tiny", "--out", "{tmp}/afile"], "error: --out: '{tmp}/afile' is a file, not a folder"),
    (["export-web", "--model", " ", "--out", "{tmp}/o"], "error: --model: empty"),
    (["export-web", "--model", "{tmp}", "--out", "{tmp}/o"], "error: "),  # a folder that is no checkpoint
])
def test_bad_input_is_one_line(capsys, tmp_path, argv, message):
    (tmp_path / "afile").write_text("a file")
    fake_checkpoint(tmp_path / "big", 60_000_000)
    (tmp_path / "garbled").mkdir()
    (tmp_path / "garbled" / "model.safetensors").write_bytes(b"\xff" * 64)
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    code, err = run(argv, capsys)
    assert code == 2 and err.startswith(message.replace("{tmp}", str(tmp_path))) and err.count("\n") == 1, err[:500]
    assert not (tmp_path / "o").exists()  # refused before anything was written


def test_a_checkpoint_other_than_the_bundled_needs_out(capsys):
    code, err = run(["export-web", "--model", "JetLM/SDAR-1.7B-Chat"], capsys)
    assert code == 2 and err == "error: --out: give a folder for 'JetLM/SDAR-1.7B-Chat' (only the bundled models " \
                                "have a default)\n"


def test_a_local_checkpoint_folder_exports_and_matches_torch(tmp_path):
    """Any checkpoint folder under the limit, not only the bundled names: here a copy of `tiny` somewhere else."""
    from s2d2.models.loading import load_model
    from s2d2.models.registry import ASSETS

    folder = tmp_path / "my-model"
    shutil.copytree(ASSETS / "tiny", folder)
    done = export_web(str(folder), tmp_path / "out")
    assert done.manifest["model"] == str(folder) and done.manifest["decoding"]["mask_id"] == 3
    hf = load_model(str(folder), device="cpu", dtype="float32", backend="dynamic")
    rows = roundtrip.forward_kinds(hf, OnnxModel(done.folder, hf.tokenizer))
    assert all(r.max_abs <= LOGIT_TOL and r.argmax_equal == r.rows for r in rows)


def test_a_folder_without_a_tokenizer_is_refused_before_writing(capsys, tmp_path):
    from s2d2.models.registry import ASSETS

    folder = tmp_path / "bare"
    folder.mkdir()
    for name in ("config.json", "model.safetensors"):
        shutil.copy(ASSETS / "tiny" / name, folder / name)
    code, err = run(["export-web", "--model", str(folder), "--out", str(tmp_path / "o")], capsys)
    assert code == 2 and err == f"error: {folder}: no tokenizer.json in the checkpoint folder (the page encodes " \
                                "prompts with it)\n"
    assert not (tmp_path / "o").exists()
