"""The code-evaluation sandbox (s2d2/sandbox): hostile programs are contained, reported and leave nothing behind."""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from s2d2.sandbox import ALLOW_ENV, CodeEvalRefused, SandboxLimits, run_program
from s2d2.sandbox import isolation

FAST = SandboxLimits(wall_s=4, cpu_s=3, processes=16)
NAMESPACES, NO_NAMESPACES_WHY = isolation.bwrap_available()
needs_namespaces = pytest.mark.skipif(NAMESPACES is None, reason=f"no namespaces here: {NO_NAMESPACES_WHY}")
ESCAPE = Path(tempfile.gettempdir()) / "s2d2-sandbox-escape-test.txt"


@pytest.fixture(autouse=True)
def opted_in(monkeypatch):
    monkeypatch.setenv(ALLOW_ENV, "1")
    ESCAPE.unlink(missing_ok=True)
    yield
    ESCAPE.unlink(missing_ok=True)


def sandbox_folders() -> set[str]:
    return {p.name for p in Path(tempfile.gettempdir()).glob("s2d2-sandbox-*") if p.is_dir()}


def run_contained(source: str, limits: SandboxLimits = FAST, **kwargs):
    """Run, then check nothing is left: no process of the run, no folder, no cgroup, no file outside."""
    if NAMESPACES is None and kwargs.get("namespaces", True):
        pytest.skip(f"bubblewrap unavailable here, the sandbox refuses (tested in test_sandbox_escapes.py): "
                    f"{NO_NAMESPACES_WHY}")
    result = run_program(source, limits, **kwargs)
    assert result.run_id and isolation.marked_processes(result.run_id) == []
    assert not any(name.startswith(f"s2d2-sandbox-{result.run_id}") for name in sandbox_folders())  # its own
    for controller in ("pids", "memory"):
        root, _ = isolation.cgroup_root(controller)
        if root is not None:
            assert not os.path.exists(os.path.join(root, f"s2d2-sandbox-{result.run_id}"))
    assert not ESCAPE.exists()
    return result


def test_refused_without_opt_in(monkeypatch) -> None:
    monkeypatch.delenv(ALLOW_ENV)
    with pytest.raises(CodeEvalRefused, match=ALLOW_ENV):
        run_program("print(1)")


def test_a_good_program_passes_and_a_failing_one_says_why() -> None:
    ok = run_contained("def f(x):\n    return x + 1\nassert f(1) == 2\nprint('fine')\n")
    assert ok.passed and ok.reason == "passed" and ok.stdout == "fine\n"
    bad = run_contained("assert 1 + 1 == 3, 'arithmetic'\n")
    assert not bad.passed and bad.reason == "error: AssertionError: arithmetic"
    early = run_contained("import os\nos._exit(0)\nassert False\n")
    assert not early.passed and "before the program's end" in early.reason


def test_layers_are_reported() -> None:
    result = run_contained("print(1)")
    assert {"rlimits", "wall-timeout", "output-cap", "capabilities-dropped", "python-guards"} <= set(result.applied)
    if NAMESPACES is not None:
        assert {"network-namespace", "pid-namespace", "read-only-filesystem"} <= set(result.applied)
    else:
        assert "namespaces" in result.missing


# -- the hostile programs, with every layer on, then with the kernel's layers alone ----------------------------

INFINITE_LOOP = "while True:\n    pass\n"
SLEEPER = "import time\nwhile True:\n    time.sleep(1)\n"
FORK_BOMB = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"
BIG_ALLOCATION = "x = bytearray(10 * 1024**3)\n"
WRITE_OUTSIDE = f"open({str(ESCAPE)!r}, 'w').write('escaped')\n"
WRITE_PARENT = "open('../s2d2-sandbox-escape-test.txt', 'w').write('escaped')\n"
SHELL_WRITE = f"import os\nassert os.system('echo escaped > {ESCAPE}') == 0\n"
SOCKET = "import socket\nsocket.create_connection(('1.1.1.1', 80), timeout=2)\n"
LISTEN = "import socket\ns = socket.socket()\ns.bind(('127.0.0.1', 0))\ns.listen()\n"
PRINT_1GB = "import sys\nchunk = 'x' * (1 << 20)\nfor _ in range(1024):\n    sys.stdout.write(chunk)\n"
ESCAPED_CHILD = "import os, time\nif os.fork() == 0:\n    os.setsid()\n    time.sleep(60)\nos._exit(0)\n"


@pytest.mark.parametrize("source, reasons", [
    (INFINITE_LOOP, ("CPU time limit", "wall time limit")),
    (SLEEPER, ("wall time limit",)),
    (FORK_BOMB, ("CPU time limit", "wall time limit", "Resource temporarily unavailable")),
    (BIG_ALLOCATION, ("MemoryError",)),
    (WRITE_OUTSIDE, ("writing outside the work folder",)),
    (WRITE_PARENT, ("writing outside the work folder",)),
    (SOCKET, ("socket.__new__ is disabled",)),
    (LISTEN, ("socket.__new__ is disabled",)),
    (PRINT_1GB, ("output limit",)),
    (ESCAPED_CHILD, ("before the program's end",)),
], ids=["loop", "sleep", "fork-bomb", "10GB", "write-abs", "write-parent", "socket", "listen", "print-1GB",
        "setsid-child"])
@pytest.mark.slow
def test_hostile_programs_are_contained(source: str, reasons: tuple[str, ...]) -> None:
    result = run_contained(source)
    assert not result.passed
    # the reason names the limit that ended it (the wall or CPU limit for the loops): no timing of our own, which a
    # loaded machine would stretch
    assert any(r in result.reason for r in reasons), result.reason


@needs_namespaces
@pytest.mark.parametrize("source, reasons", [
    (WRITE_OUTSIDE, ("Read-only file system",)),
    (WRITE_PARENT, ("Read-only file system",)),
    (SHELL_WRITE, ("AssertionError",)),
    (SOCKET, ("Network is unreachable", "unreachable")),
    (FORK_BOMB, ("CPU time limit", "wall time limit", "Resource temporarily unavailable")),
    (ESCAPED_CHILD, ("before the program's end",)),
], ids=["write-abs", "write-parent", "shell-write", "socket", "fork-bomb", "setsid-child"])
@pytest.mark.slow
def test_the_kernel_layers_contain_them_without_the_python_guards(source: str, reasons: tuple[str, ...]) -> None:
    result = run_contained(source, python_guards=False)
    assert not result.passed
    assert any(r in result.reason for r in reasons), result.reason


@needs_namespaces
@pytest.mark.parametrize("guards", [True, False])
def test_a_service_on_this_machine_is_out_of_reach(guards: bool) -> None:
    import socket

    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        result = run_contained(f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=2)\n",
                               python_guards=guards)
        server.settimeout(0)
        with pytest.raises(BlockingIOError):
            server.accept()  # nothing reached it
    assert not result.passed
    # bubblewrap's network namespace has its own loopback, with nothing listening on it
    expected = ("socket.__new__ is disabled",) if guards else ("Network is unreachable", "Connection refused")
    assert any(r in result.reason for r in expected), result.reason


@pytest.mark.parametrize("source, reasons", [
    (FORK_BOMB, ("CPU time limit", "wall time limit", "Resource temporarily unavailable")),
    (WRITE_OUTSIDE, ("writing outside the work folder",)),
    (SOCKET, ("socket.__new__ is disabled",)),
    (ESCAPED_CHILD, ("before the program's end",)),
], ids=["fork-bomb", "write-abs", "socket", "setsid-child"])
@pytest.mark.slow
def test_without_namespaces_the_fallback_still_contains_them(source: str, reasons: tuple[str, ...]) -> None:
    result = run_contained(source, namespaces=False)
    assert not result.passed and result.missing["namespaces"] == "turned off by the caller"
    assert any(r in result.reason for r in reasons), result.reason


def test_files_inside_the_work_folder_are_fine_and_removed() -> None:
    source = ("import os\nos.makedirs('a/b')\nopen('a/b/c.txt', 'w').write('x' * 1000)\nos.chmod('a', 0)\n"
              "import tempfile\ntempfile.NamedTemporaryFile(delete=False).write(b'y')\n")
    result = run_contained(source)
    assert result.passed, result.reason


def test_environment_is_scrubbed(monkeypatch) -> None:
    monkeypatch.setenv("S2D2_TEST_SECRET", "hunter2")
    result = run_contained("import os\nassert 'S2D2_TEST_SECRET' not in os.environ\nassert os.getcwd() == "
                           "os.environ['HOME']\n")
    assert result.passed, result.reason


HARNESS = """
import sys
from s2d2.sandbox import SandboxLimits, run_program
run_program(sys.argv[1], SandboxLimits(wall_s=120, cpu_s=120, processes=16), namespaces=False)
"""
LINGERING = """
import os, time
if os.fork() == 0:
    time.sleep(120)
    os._exit(0)
open("started", "w").write("1")
time.sleep(120)
"""


def run_processes(folder: Path) -> list[int]:
    """The processes working in a sandbox folder under `folder` (the runner, the program, what it forked)."""
    found = []
    for name in filter(str.isdigit, os.listdir("/proc")):
        try:
            if os.readlink(f"/proc/{name}/cwd").startswith(str(folder)):
                found.append(int(name))
        except OSError:
            continue
    return found


def wait_for(condition, seconds: float) -> bool:
    """Poll `condition` until it holds or `seconds` pass (an event to wait on, not a timing)."""
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


@pytest.mark.slow
def test_the_run_dies_with_the_process_that_started_it(tmp_path) -> None:
    """Without bubblewrap, a harness killed mid-run (SIGKILL: no finally runs; a program of the same user could
    send it) leaves none of the run's processes behind, the program's own child included."""
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, ALLOW_ENV: "1", "S2D2_CODE_EVAL_ACCEPT_LESS": "1", "TMPDIR": str(tmp_path),
           "PYTHONPATH": str(root)}
    harness = subprocess.Popen([sys.executable, "-c", HARNESS, LINGERING], env=env, cwd=root)
    try:
        assert wait_for(lambda: any(tmp_path.glob("s2d2-sandbox-*/started")) or harness.poll() is not None, 60)
        assert harness.poll() is None and len(run_processes(tmp_path)) >= 3  # runner, program, its child
        harness.kill()
        harness.wait()
        assert wait_for(lambda: not run_processes(tmp_path), 20), run_processes(tmp_path)
    finally:
        harness.kill()
        for pid in run_processes(tmp_path):
            os.kill(pid, 9)
