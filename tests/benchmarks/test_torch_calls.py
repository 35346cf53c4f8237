"""benchmarks/torch_calls.py counts the batch-first engine's torch calls per sequence-forward and names where they
are made."""
from __future__ import annotations

import re

import torch

from benchmarks import torch_calls


def test_the_counter_counts_calls_at_the_line_that_made_them() -> None:
    counter = torch_calls.CallCounter()
    x = torch.zeros(4)
    with counter:
        x.add_(1)
        torch.cat([x, x])
        _ = x.shape  # an attribute read, not a call
    assert sum(counter.sites.values()) == 2
    assert all(site.startswith("test_torch_calls.py:") for site in counter.sites)


def test_a_small_run_prints_each_arm_and_its_sites(capsys) -> None:
    torch_calls.main(["--arms", "dynamic-baseline", "sdar-config-b", "shifted:fastdllm-config-a", "--batch", "4",
                      "--n", "4", "--gen-length", "8", "--decodes", "1", "--sites", "3"])
    out = capsys.readouterr().out
    for arm in ("dynamic-baseline", "sdar-config-b", "shifted:fastdllm-config-a"):
        m = re.search(rf"^{arm}\s+seq-fwd\s+(\d+)\s+torch calls\s+([\d.]+)\s+python calls\s+([\d.]+)"
                      rf"\s+cpu us\s+([\d.]+)$", out, re.M)
        assert m and int(m.group(1)) > 0 and all(float(m.group(k)) > 0 for k in (2, 3, 4)), arm
    assert len(re.findall(r"^    \s*[\d.]+  \S+\.py:\d+$", out, re.M)) == 9


def test_python_calls_count_each_python_level_call_and_not_calls_into_c() -> None:
    def leaf() -> int:
        return 1

    def run() -> int:
        total = 0
        for _ in range(3):
            total += leaf()
        return total + len("abc")  # len is a C function: not counted

    assert torch_calls.python_calls_of(run) == 1 + 3  # run itself and the three leaves
    assert torch_calls.python_calls_of(run) == torch_calls.python_calls_of(run)  # exact: the same every time
