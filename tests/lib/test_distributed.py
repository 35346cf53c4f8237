"""Distributed sweeps: launcher environment parsing, and the same numbers from 1 process, from torchrun with 2 gloo
ranks, and from 2 ranks started by environment variables alone (what `accelerate launch` sets), resuming a kill."""
from __future__ import annotations

import csv
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from s2d2.sweeps.distributed import DistEnv, dist_env, rank_device
from s2d2.sweeps.shards import parse_rows, rank_file

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "assets" / "tasks" / "gsm8k_style_sample.jsonl"
LAUNCH_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
               "TORCHELASTIC_USE_AGENT_STORE", "GROUP_RANK")
TIMING = {"wall_per_token", "speedup_wall_vs_ar", "speedup_wall_vs_baseline"}

pytestmark = pytest.mark.slow  # launches several processes


def test_dist_env_reads_what_launchers_set():
    assert dist_env({}) == DistEnv(0, 1, 0)
    torchrun = {"RANK": "5", "WORLD_SIZE": "16", "LOCAL_RANK": "1", "MASTER_ADDR": "node0", "MASTER_PORT": "29500"}
    env = dist_env(torchrun)
    assert env == DistEnv(5, 16, 1) and env.distributed and not env.is_main
    with pytest.raises(ValueError, match="MASTER_ADDR and MASTER_PORT unset"):
        dist_env({"RANK": "0", "WORLD_SIZE": "2"})
    with pytest.raises(ValueError, match="need 0 <= RANK < WORLD_SIZE"):
        dist_env({**torchrun, "RANK": "16"})
    with pytest.raises(ValueError, match="WORLD_SIZE: expected an integer"):
        dist_env({"WORLD_SIZE": "two"})


def test_each_rank_gets_its_local_gpu():
    assert rank_device(None, DistEnv(5, 16, 1), cuda_available=True) == "cuda:1"
    assert rank_device("cuda", DistEnv(0, 1, 0), cuda_available=True) == "cuda:0"
    assert rank_device("cpu", DistEnv(5, 16, 1), cuda_available=True) == "cpu"
    assert rank_device(None, DistEnv(5, 16, 1), cuda_available=False) is None


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in LAUNCH_VARS}
    return {**env, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", **extra}


def _run(cmd: list[str], **env: str) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, capture_output=True, text=True, env=_env(**env), cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def _science(out: Path) -> list[dict]:
    data = json.loads((out / "results.json").read_text())
    return [{k: v for k, v in c.items() if k not in TIMING} for c in data["cells"]]


def _csv_science(out: Path) -> list[list[str]]:
    with (out / "results.csv").open() as fh:
        header, *rows = list(csv.reader(fh))
    keep = [j for j, k in enumerate(header) if k not in TIMING]
    return [[r[j] for j in keep] for r in [header, *rows]]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_ranks_give_the_single_process_numbers_and_resume_a_kill(tmp_path):
    grid = tmp_path / "grid.json"
    grid.write_text(json.dumps([
        {"name": "ar", "preset": "ar"},
        {"name": "dynamic-tau0.7-b4", "preset": "dynamic-baseline", "config": {"confidence_threshold": 0.7}},
        {"name": "s2d2-ucb-b8", "preset": "sdar-config-a", "config": {"block_length": 8,
                                                                      "policy": "contextual_bandit_ucb"}},
    ]))
    n, cells = 6, 3
    bench = ["-m", "s2d2", "bench", "--model", "tiny", "--task", f"jsonl:{SAMPLE}", "--problems", str(n),
             "--grid", str(grid), "--gen-length", "48", "--threads", "1"]
    one, two = tmp_path / "one", tmp_path / "two"
    from s2d2.__main__ import main

    assert main([*bench[2:], "--out", str(one), "--no-progress"]) == 0  # the single process: this one
    proc = _run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
                 *bench, "--out", str(two)])

    single = _science(one)
    assert _science(two) == single  # accuracy, per-problem results, NFE, acceptance, intervals, p vs AR: all equal
    assert _csv_science(two) == _csv_science(one)
    assert single[0]["correct_by_problem"] == "101010"  # odd problems are in the bundled model's domain
    meta = json.loads((two / "results.json").read_text())["meta"]
    assert meta["world_size"] == 2 and meta["task"] == "jsonl:gsm8k_style_sample.jsonl"
    assert meta["problem_ids"] == [f"s{k:02d}" for k in range(1, n + 1)]
    assert {p.name for p in two.iterdir()} >= {"results.json", "results.csv", "README-table.md"}
    shares = [list(parse_rows(rank_file(two, r).read_text())) for r in (0, 1)]
    assert [len(s) for s in shares] == [n * cells // 2] * 2
    assert len({(r["cell"], r["i"]) for s in shares for r in s}) == n * cells
    # one progress bar (rank 0's) with the global count, from 0 to the end
    assert proc.stderr.count(f" 0/{n * cells} ") == 1 and f" {n * cells}/{n * cells} " in proc.stderr
    assert proc.stdout.count("written:") == 1

    # Rank 1 "killed": its last 4 rows lost and a torn line left. Relaunch with environment variables only (no
    # torchrun, as accelerate launch or a cluster script would): only the lost items run, the numbers are the same.
    lines = rank_file(two, 1).read_text().splitlines()
    rank_file(two, 1).write_text("\n".join(lines[:-4]) + "\n" + lines[-4][:25])
    port = str(_free_port())
    procs = [subprocess.Popen([sys.executable, *bench, "--out", str(two), "--no-progress"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, cwd=ROOT,
                              env=_env(RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
                                       MASTER_PORT=port))
             for r in (0, 1)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs[0][1][-2000:] + outs[1][1][-2000:]
    redone = [len(list(parse_rows(rank_file(two, r).read_text()))) - n * cells // 2 for r in (0, 1)]
    assert redone == [2, -2]  # 4 lost items, 2 per rank; rank 1 now holds its first 5 rows plus 2 redone
    assert _science(two) == single
    assert "written:" in outs[0][0] and outs[1][0] == ""  # rank 0 reports; the other rank stays quiet


def test_two_nodes_meeting_at_a_c10d_rendezvous_on_loopback_give_the_single_process_numbers(tmp_path):
    # Two "nodes" on this machine: two torchrun agents, one process each, meeting at node 0's c10d rendezvous on
    # 127.0.0.1 exactly as two hosts would at node0:PORT (node 0 hosts the store), writing to one shared --out.
    grid = tmp_path / "grid.json"
    grid.write_text(json.dumps([
        {"name": "ar", "preset": "ar"},
        {"name": "lossless-b8", "preset": "lossless", "config": {"block_length": 8}},
        {"name": "dynamic-tau0.7-b8", "preset": "dynamic-baseline", "config": {"block_length": 8,
                                                                               "confidence_threshold": 0.7}},
    ]))
    n, cells = 4, 3
    bench = ["-m", "s2d2", "bench", "--model", "tiny", "--task", f"jsonl:{SAMPLE}", "--problems", str(n),
             "--grid", str(grid), "--gen-length", "32", "--threads", "1", "--no-progress"]
    one, two = tmp_path / "one", tmp_path / "two"
    from s2d2.__main__ import main

    assert main([*bench[2:], "--out", str(one)]) == 0
    port = str(_free_port())
    nodes = [subprocess.Popen([sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--node_rank", str(r),
                               "--nproc_per_node", "1", "--rdzv-backend", "c10d", "--rdzv-endpoint",
                               f"127.0.0.1:{port}", "--rdzv-id", "two-nodes", "--rdzv-conf",
                               f"is_host={'true' if r == 0 else 'false'}", "--local-addr", "127.0.0.1",
                               *bench, "--out", str(two)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                              env=_env(GLOO_SOCKET_IFNAME="lo"))
             for r in (0, 1)]
    outs = [p.communicate(timeout=300) for p in nodes]
    assert [p.returncode for p in nodes] == [0, 0], outs[0][1][-2000:] + outs[1][1][-2000:]
    assert _science(two) == _science(one)  # accuracy, NFE, acceptance, p-values, equals_ar: the same science
    assert _csv_science(two) == _csv_science(one)
    meta = json.loads((two / "results.json").read_text())["meta"]
    assert meta["world_size"] == 2
    shares = [list(parse_rows(rank_file(two, r).read_text())) for r in (0, 1)]
    assert sorted(len(s) for s in shares) == [n * cells // 2] * 2  # each node decoded half the items
    assert sum("written:" in out for out, _ in outs) == 1  # one merge, by the global rank 0
    lossless = next(c for c in _science(two) if c["name"] == "lossless-b8")
    assert lossless["equals_ar"] == 1.0
