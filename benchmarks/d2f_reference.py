"""Ours beside phymhan/S2D2's D2F reference, on tiny random checkpoints in the official LLaDA and Dream layouts.

    S2D2_REF_D2F=/path/to/S2D2/D2F S2D2_REF_SITE=/path/to/site python -m benchmarks.d2f_reference [--record-logits]

`S2D2_REF_D2F` is a local checkout of the reference's `D2F/` folder (never vendored: `fetch` it, or clone
github.com/phymhan/S2D2); `S2D2_REF_SITE` a directory holding transformers 4.46 and peft 0.13 (`pip install
--no-deps --target DIR transformers==4.46.3 tokenizers==0.20.3 huggingface_hub==0.26.5 peft==0.13.2
accelerate==1.1.1`), which its modeling files need. The reference half runs in its own process
(d2f_reference_side.py) on the same folders; without the variables this script prints one line and exits 0.

* `--record-logits` writes tests/data/d2f_reference_logits.safetensors: the reference modeling code's float64
  logits for the forwards tests/lib/test_d2f_loading.py compares natively (full attention, D2F's block-causal mask, a
  cached forward, the verifier, a LoRA adapter), with the checkpoints' fingerprints.
* otherwise it decodes every case of `decode_cases()` with the reference's `generate_block_single` /
  `generate_block_speculative` and with ours (`loop="pipeline"`), and compares tokens, NFE, the positions decoded
  at every step (with how: threshold / top-1 / accepted / resampled / fallback) and every verify decision.
"""
from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from benchmarks.d2f_reference_runner import reference_env, run_reference, write_checkpoints

ROOT = Path(__file__).resolve().parents[1]

LOGITS = ROOT / "tests" / "data" / "d2f_reference_logits.safetensors"
PROMPT, BLOCK = [5, 9, 17, 33, 2], 4  # the logits test: a 5-token prompt, then two blocks of 4


def record_logits(env: dict[str, str]) -> None:
    from fixtures import tiny_d2f as M
    from safetensors.torch import load_file, save_file

    with tempfile.TemporaryDirectory() as d:
        folders = write_checkpoints(Path(d))
        ids = PROMPT + [40, 41, 42, 43, 60, 61, 62, 63]
        job = {"kind": "logits", **{fam: {**f, "ids": ids, "prompt": len(PROMPT), "block": BLOCK,
                                          "mask_id": M.MASK_ID} for fam, f in folders.items()}}
        out = Path(d) / "logits.safetensors"
        run_reference(env, job, out)
        tensors = load_file(str(out))
        meta = {"ids": json.dumps(ids), "prompt": str(len(PROMPT)), "block": str(BLOCK),
                **{f"{fam}/{k}": v for fam, f in folders.items() for k, v in f.items() if "fingerprint" in k}}
        save_file(tensors, str(LOGITS), metadata=meta)
    print(f"wrote {LOGITS.relative_to(ROOT)}: {len(tensors)} logit tables from the reference modeling code")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--record-logits", action="store_true", help="write tests/data/d2f_reference_logits")
    args = parser.parse_args()
    env = reference_env()
    if env is None:
        print("skipped: set S2D2_REF_D2F (the reference's D2F folder) and S2D2_REF_SITE (transformers 4.46 + peft "
              "0.13) to run the D2F reference beside ours")
        return
    if args.record_logits:
        record_logits(env)
        return
    from benchmarks.d2f_compare import compare_all  # the decode comparison (kept beside this script)

    compare_all(env)


if __name__ == "__main__":
    main()
