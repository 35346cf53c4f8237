"""The app as a server process for the load benchmarks: start it on a free port, read its CPU time and RSS, stop it,
and the Run knobs a benchmark session sends."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

from components.run.knobs import KNOB_NAMES, preset_values

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def server_cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def server_rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def start_server(port: int, env_extra: dict | None = None, preexec: Callable[[], None] | None = None
                 ) -> subprocess.Popen:
    """The app serving on 127.0.0.1:`port` (`preexec`: run in the child before it starts, e.g. pinning it to a core,
    benchmarks/cpu_pin.py)."""
    code = "import app; app.serve(server_name='127.0.0.1', server_port=%d, quiet=True)" % port  # as `python app.py`
    if os.environ.get("S2D2_BENCH_LOOP_PROFILE"):  # where the event loop's time goes (benchmarks/loop_sampler.py)
        code = "import benchmarks.loop_sampler as s, os; s.start(os.environ['S2D2_BENCH_LOOP_PROFILE']); " + code
    if os.environ.get("S2D2_BENCH_SHARE_LEDGER"):  # who the handler CPU went to (benchmarks/share_ledger.py)
        code = "import benchmarks.share_ledger as l, os; l.start(os.environ['S2D2_BENCH_SHARE_LEDGER']); " + code
    if os.environ.get("S2D2_BENCH_EVENT_SPLIT"):  # where one event's wall goes (benchmarks/event_split.py)
        code = "import benchmarks.event_split as e, os; e.start(os.environ['S2D2_BENCH_EVENT_SPLIT']); " + code
    # the repository first; a PYTHONPATH the benchmark was given stays after it (e.g. a folder with packages to try)
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": path, **(env_extra or {})}
    if env.get("S2D2_TRUSTED_PROXY_HOPS", "0") != "0":  # X-Forwarded-For read only from loopback (the app refuses
        env.setdefault("S2D2_TRUSTED_PROXIES", "127.0.0.1")  # proxy hops trusted from any connection)
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, preexec_fn=preexec)
    deadline = time.time() + 180
    while time.time() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return proc
        except OSError:
            if proc.poll() is not None:
                raise RuntimeError("the app exited during start-up")
            time.sleep(0.5)
    proc.kill()
    raise RuntimeError("the app did not start within 180 s")


def stop_server(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()


def knobs(gen: int) -> list:
    values = dict(zip(KNOB_NAMES, preset_values("sdar-config-a")))
    values["gen_length"] = gen
    return list(values.values())
