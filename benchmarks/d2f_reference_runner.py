"""The D2F reference runner: the reference checkout's environment (S2D2_REF_D2F, S2D2_REF_SITE), a job run in the
reference's own process (d2f_reference_side.py), and the tiny official-layout checkpoints both sides load."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any


def reference_env() -> dict[str, str] | None:
    ref, site = os.environ.get("S2D2_REF_D2F"), os.environ.get("S2D2_REF_SITE")
    if not ref or not (Path(ref) / "generation_utils.py").is_file():
        return None
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (site, ref) if p)
    return env


def run_reference(env: dict[str, str], job: dict[str, Any], out: Path) -> None:
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(job, f)
    side = Path(__file__).resolve().parent / "d2f_reference_side.py"
    subprocess.run([sys.executable, str(side), f.name, str(out)], env=env, check=True,
                   cwd=env["PYTHONPATH"].split(os.pathsep)[-1])


def write_checkpoints(tmp: Path, head_scale: float = 0.6) -> dict[str, dict[str, str]]:
    from fixtures import tiny_d2f as M

    out = {}
    for fam, write in (("llada", M.write_llada), ("dream", M.write_dream)):
        folder = write(tmp / f"{fam}-{head_scale}", head_scale=head_scale)
        adapter = M.write_lora(tmp / f"{fam}-lora", fam)
        out[fam] = {"folder": str(folder), "adapter": str(adapter), "fingerprint": M.fingerprint(folder),
                    "adapter_fingerprint": M.fingerprint(adapter)}
    return out
