"""The sandbox under the third hostile probe (issue 29, row 3): wrong answers that stop early or forge the verdict
fail; nothing outlives the wall limit; the program sees nothing of this machine; memory is capped for all its
processes together; a promised layer that is missing is a one-line refusal unless the user accepts less."""
from __future__ import annotations

import textwrap

import json
import os
import secrets
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from s2d2.sandbox import ACCEPT_LESS_ENV, ALLOW_ENV, CodeEvalRefused, SandboxLimits, run_program
from s2d2.sandbox import isolation
from s2d2.tasks.code import check_code

FAST = SandboxLimits(wall_s=4, cpu_s=3, processes=16)
BWRAP, NO_BWRAP_WHY = isolation.bwrap_available()
needs_bwrap = pytest.mark.skipif(BWRAP is None, reason=f"bubblewrap unavailable here: {NO_BWRAP_WHY}")
ROOT = Path(__file__).resolve().parents[2]
ADD = json.dumps({"format": "humaneval", "prompt": "def add(a, b):\n",
                  "test": "def check(candidate):\n    assert candidate(2, 3) == 5\n", "entry_point": "add"})


@pytest.fixture(autouse=True)
def opted_in(monkeypatch):
    monkeypatch.setenv(ALLOW_ENV, "1")


@needs_bwrap
def test_a_right_answer_still_passes() -> None:
    assert check_code("    return a + b\n", ADD, "humaneval", FAST).passed


FORGE = """
import gc, os, sys
found = {}
for route in ("frame", "back", "gc", "traceback"):
    try:
        if route == "frame":
            scope = sys._getframe(1).f_locals
        elif route == "back":
            scope = (lambda: sys._getframe(0))().f_back.f_back.f_locals
        elif route == "gc":
            scope = next(o for o in gc.get_objects() if isinstance(o, dict) and ("token" in o or "token_fd" in o))
        else:
            try:
                raise KeyError
            except KeyError as exc:
                scope = exc.__traceback__.tb_frame.f_back.f_locals
        cfg = scope.get("cfg", scope)
        found.update({k: cfg[k] for k in ("token", "status_fd", "token_fd", "done_fd") if k in cfg})
    except Exception:
        pass
if "token_fd" in found:
    os.write(found["done_fd"], os.read(found["token_fd"], 256))
if "token" in found:
    os.write(found["status_fd"], (found["token"] + "\\n").encode())
os._exit(0)
"""
FAKE_STATUS = """
import json, os, signal
fake = json.dumps({"status": {"exit": 0, "signal": None}, "finished": True, "applied": [], "missing": {}})
for fd in range(3, 64):
    try:
        os.write(fd, (fake + "\\n").encode())
    except OSError:
        pass
os.kill(os.getppid(), signal.SIGKILL)
os._exit(0)
"""


@pytest.mark.parametrize("completion", [
    "    return a - b\n\nif __name__ == '__main__':\n    import sys\n    sys.exit(0)\n",
    "    exit()\n",
    "    raise SystemExit\n",
    "    raise SystemExit(0)\n",
    "    return a - b\n" + FORGE,
    "    return a - b\n" + FAKE_STATUS,
], ids=["sys-exit-in-main", "exit-in-body", "raise-SystemExit", "SystemExit-0", "forged-token", "fake-status"])
@needs_bwrap
def test_a_wrong_answer_that_stops_early_or_forges_the_verdict_fails(completion: str) -> None:
    result = check_code(completion, ADD, "humaneval", FAST)
    assert not result.passed, result


@needs_bwrap
def test_a_system_exit_says_it_is_counted_as_a_failure() -> None:
    result = check_code("    raise SystemExit(0)\n", ADD, "humaneval", FAST)
    assert "SystemExit(0)" in result.reason and "a failure" in result.reason, result.reason


def _alive_with(tag: str) -> list[int]:
    found = []
    for name in os.listdir("/proc"):
        try:
            with open(f"/proc/{name}/cmdline", "rb") as fh:
                if tag.encode() in fh.read():
                    found.append(int(name))
        except (OSError, ValueError):
            continue
    return found


@pytest.mark.parametrize("namespaces", [
    pytest.param(True, marks=needs_bwrap),
    pytest.param(False, marks=pytest.mark.skipif(os.geteuid() != 0 or not isolation.nobody_can_run_python(), reason=(
        "without bubblewrap the program runs as the harness's own user and can signal it (README: accepting "
        "less); only root with a Python that uid nobody can run drops to nobody")))],
    ids=["bwrap", "accept-less"])
def test_killing_the_clock_leaves_nothing_alive(namespaces: bool) -> None:
    """The program starts a sleeper that leaves its session and clears its environment, then kills its parent
    and grandparent; once run_program returns, no process of the run is alive."""
    tag = secrets.token_hex(6)
    source = (f"import os, signal, subprocess, sys\n"
              f"subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)', {tag!r}], env={{}},\n"
              f"                 start_new_session=True)\n"
              f"grand = int(open(f'/proc/{{os.getppid()}}/stat').read().split(')')[1].split()[1])\n"
              f"for pid in (grand, os.getppid()):\n"
              f"    try:\n        os.kill(pid, signal.SIGKILL)\n    except OSError:\n        pass\n"
              f"import time\ntime.sleep(30)\n")
    result = run_program(source, FAST, namespaces=namespaces, python_guards=False)
    assert not result.passed
    assert _alive_with(tag) == []


@needs_bwrap
def test_the_program_sees_nothing_of_this_machine(tmp_path) -> None:
    canary = tmp_path / f"canary-{secrets.token_hex(4)}.txt"
    canary.write_text("secret")
    paths = ["/etc/passwd", str(ROOT / "s2d2" / "sandbox" / "run.py"), str(canary)]
    source = ("import os\nseen = []\n"
              f"for path in {paths!r}:\n"
              "    try:\n        open(path).read()\n        seen.append(path)\n    except OSError:\n        pass\n"
              "for folder in (os.path.expanduser('~root/.ssh'), '/root/.ssh', '/home'):\n"
              "    try:\n        os.listdir(folder)\n        seen.append(folder)\n    except OSError:\n        pass\n"
              "try:\n    open('/tmp/s2d2-written', 'w').write('x')\n    seen.append('/tmp')\nexcept OSError:\n"
              "    pass\nassert seen == [], seen\n")
    result = run_program(source, FAST, python_guards=False)
    assert result.passed, result.reason
    assert not Path("/tmp/s2d2-written").exists()


@needs_bwrap
def test_a_unix_socket_outside_is_out_of_reach(tmp_path) -> None:
    path = str(tmp_path / "listener.sock")
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(path)
        server.listen()
        server.settimeout(0)
        source = f"import socket\ns = socket.socket(socket.AF_UNIX)\ns.connect({path!r})\n"
        result = run_program(source, FAST, python_guards=False)
        with pytest.raises(BlockingIOError):
            server.accept()
    assert not result.passed, result.reason
    expected = "Address family not supported" if "no-unix-sockets" in result.applied else "No such file"
    assert expected in result.reason, result.reason


@needs_bwrap
def test_no_unix_socket_can_be_made_whatever_the_mounts() -> None:
    """The seccomp filter (x86_64, aarch64) refuses socket(AF_UNIX): a listener on a path the sandbox can see, or
    an abstract one, is out of reach too; other families and pipes still work."""
    result = run_program("import socket\nsocket.socket(socket.AF_UNIX).connect('\\0outside')\n", FAST,
                         python_guards=False)
    if "no-unix-sockets" not in result.applied:
        pytest.skip(f"no seccomp filter here: {result.missing.get('no-unix-sockets')}")
    assert not result.passed and "Address family not supported" in result.reason, result.reason
    fine = run_program("import os, socket\nsocket.socket(socket.AF_INET).close()\nr, w = os.pipe()\n", FAST,
                       python_guards=False)
    assert fine.passed, fine.reason


@pytest.mark.parametrize("namespaces", [pytest.param(True, marks=needs_bwrap), False], ids=["bwrap", "accept-less"])
def test_memory_is_capped_for_all_processes_together(namespaces: bool) -> None:
    """Four processes of 200 MB each (touched) under a 512 MiB budget: they cannot all succeed."""
    # Each child holds its block until all four have one (a barrier): short-lived children one after another
    # would fit the budget by turns, and the test would depend on how the machine schedules them.
    source = textwrap.dedent("""\
        import os, select
        ready_r, ready_w = os.pipe()
        go_r, go_w = os.pipe()
        pids = []
        for _ in range(4):
            pid = os.fork()
            if pid == 0:
                os.close(ready_r)
                os.close(go_w)
                try:
                    block = b'x' * (200 * 1024 * 1024)
                except MemoryError:
                    os._exit(3)
                os.write(ready_w, b'1')
                os.read(go_r, 1)  # until the parent lets go
                os._exit(0)
            pids.append(pid)
        os.close(ready_w)
        os.close(go_r)
        got, codes = b'', {}
        while len(got) < 4 and not codes:  # every block held, or a child died for want of memory
            if select.select([ready_r], [], [], 0.05)[0]:
                got += os.read(ready_r, 4)
            pid, status = os.waitpid(-1, os.WNOHANG)
            if pid:
                codes[pid] = status
        os.close(go_w)
        codes.update({p: os.waitpid(p, 0)[1] for p in pids if p not in codes})
        assert sorted(codes.values()) == [0, 0, 0, 0], codes
        """)
    result = run_program(source, SandboxLimits(wall_s=20, cpu_s=10, memory_mb=512, processes=8),
                         namespaces=namespaces, python_guards=False)
    assert not result.passed, result.reason


def test_without_bubblewrap_the_sandbox_refuses_in_one_line(monkeypatch) -> None:
    monkeypatch.setattr(isolation, "bwrap_available", lambda: (None, "bubblewrap (bwrap) is not installed"))
    monkeypatch.delenv(ACCEPT_LESS_ENV, raising=False)
    with pytest.raises(CodeEvalRefused, match=f"bwrap.*{ACCEPT_LESS_ENV}=1") as caught:
        run_program("print(1)", FAST)
    assert "\n" not in str(caught.value)
    monkeypatch.setenv(ACCEPT_LESS_ENV, "1")
    result = run_program("print(1)", FAST)
    assert result.passed and "not installed" in result.missing["namespaces"]


@pytest.mark.slow  # seconds: a subprocess or a whole CLI run (left out of the quick subset)
def test_the_cli_refuses_code_tasks_without_bubblewrap_in_one_line(tmp_path) -> None:
    """A PATH without bwrap: `eval-task --scorer humaneval` stops with one line, before any model loads."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    env = {**os.environ, "PATH": str(bin_dir), ALLOW_ENV: "1"}
    env.pop(ACCEPT_LESS_ENV, None)
    task = ROOT / "assets" / "tasks" / "code_sample_humaneval.jsonl"
    proc = subprocess.run([sys.executable, "-m", "s2d2", "eval-task", "--model", "tiny", "--task", f"jsonl:{task}",
                           "--scorer", "humaneval", "--n", "1", "--out", str(tmp_path / "o.json")],
                          capture_output=True, text=True, cwd=ROOT, env=env, timeout=120)
    assert proc.returncode != 0
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "bubblewrap" in lines[0] and ACCEPT_LESS_ENV in lines[0], proc.stderr
