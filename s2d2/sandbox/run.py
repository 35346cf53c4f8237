"""Run one untrusted Python program in the sandbox and say whether it passed, and if not, why.

The program runs in a separate process, in a fresh temporary folder (its cwd, HOME and TMPDIR), with a scrubbed
environment and stdin from /dev/null, under these layers (each applied where this machine allows it; the result
lists what applied and why anything did not, see isolation.py and child.py):

* new PID, network (no interface up: no network at all) and mount namespaces; every mount read-only except the
  work folder; every capability dropped for good, uid 0 included;
* limits: CPU seconds, address space, file size, open files, core dumps off, processes (RLIMIT_NPROC, or a pids
  cgroup for uid 0);
* a wall-clock timeout that kills the whole process group; stdout + stderr capped (over the cap the run is killed);
* Python-level guards: no sockets, no writes outside the work folder, no ctypes libraries.

Afterwards every process of the run is killed (group, marker, cgroup) and the folder is removed, whatever
happened. Nothing runs unless the user opted in (S2D2_ALLOW_CODE_EVAL=1, or a CLI flag that sets it).
"""
from __future__ import annotations

import json
import os
import secrets
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from . import isolation as iso

ALLOW_ENV = "S2D2_ALLOW_CODE_EVAL"
REFUSAL = (f"running model-written code is off; opt in with {ALLOW_ENV}=1 or --allow-code-eval to run it in the "
           "sandbox (docs/evaluation.md, 'Code benchmarks (HumanEval / MBPP format)')")
CHILD = str(Path(__file__).with_name("child.py"))
MAX_SOURCE_BYTES = 1 << 20
SIGNAL_REASONS = {signal.SIGXCPU: "CPU time limit", signal.SIGXFSZ: "file size limit",
                  signal.SIGKILL: "killed (SIGKILL)", signal.SIGSEGV: "crashed (SIGSEGV)"}


class CodeEvalRefused(ValueError):
    """Code evaluation was asked for without the user's opt-in."""


def code_eval_allowed() -> bool:
    return os.environ.get(ALLOW_ENV, "").strip() == "1"


def allow_code_eval() -> None:
    """The CLI flag's opt-in: this process (and its ranks' children) may run code in the sandbox."""
    os.environ[ALLOW_ENV] = "1"


def require_code_eval() -> None:
    if not code_eval_allowed():
        raise CodeEvalRefused(REFUSAL)


@dataclass(frozen=True)
class SandboxLimits:
    wall_s: float = 10.0
    cpu_s: int = 10
    memory_mb: int = 2048  # address space, so a 10 GB allocation fails at once
    file_mb: int = 16
    processes: int = 32
    open_files: int = 256
    output_bytes: int = 1 << 20  # stdout + stderr; more kills the run
    kept_bytes: int = 16 << 10  # per stream, in the result


@dataclass(frozen=True)
class SandboxResult:
    passed: bool
    reason: str  # "passed", or why not, in one line
    exit_code: Optional[int]
    signal: Optional[int]
    stdout: str
    stderr: str
    wall_s: float
    applied: tuple[str, ...] = ()  # the isolation layers in force
    missing: dict[str, str] = field(default_factory=dict)  # layers not in force, and why
    run_id: str = ""  # the marker in the run's environment (isolation.marked_processes finds what is left)


def run_program(source: str, limits: SandboxLimits = SandboxLimits(), *, namespaces: bool = True,
                python_guards: bool = True) -> SandboxResult:
    """Run `source` as __main__ in the sandbox; it passes when it runs to its end and exits 0.
    `namespaces` / `python_guards` = False turn those layers off (tests use it to check each layer alone)."""
    require_code_eval()
    if len(source.encode("utf-8", "replace")) > MAX_SOURCE_BYTES:
        return _refused(f"program larger than {MAX_SOURCE_BYTES} bytes")
    work = os.path.realpath(tempfile.mkdtemp(prefix="s2d2-sandbox-"))
    marker, token = secrets.token_hex(8), secrets.token_hex(16)
    cgroup: Optional[str] = None
    proc: Optional[subprocess.Popen] = None
    try:
        Path(work, "program.py").write_text(source, encoding="utf-8")
        prefix, missing, applied = _layers(namespaces, python_guards)
        root, why = iso.pids_cgroup_root()
        if root is not None:
            try:
                cgroup = iso.make_cgroup(root, f"s2d2-sandbox-{marker}", limits.processes)
            except OSError as exc:
                missing["pids-cgroup"] = f"could not make one under {root} ({exc.strerror})"
        elif os.geteuid() == 0:
            missing["pids-cgroup"] = why
        status_r, status_w = os.pipe()
        cfg = _settings(limits, work, token, status_w, prefix is not None, python_guards, cgroup)
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": work, "TMPDIR": work, "LANG": "C.UTF-8",
               iso.MARKER_ENV: marker}
        t0 = time.monotonic()
        proc = subprocess.Popen([*(prefix or ()), sys.executable, "-I", "-B", CHILD], cwd=work, env=env,
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                pass_fds=(status_w,), start_new_session=True)
        os.close(status_w)
        proc.stdin.write(json.dumps(cfg).encode())
        proc.stdin.close()
        out = _collect(proc, status_r, limits)
        out["wall_s"] = time.monotonic() - t0
        return _result(out, limits, token, applied, missing, marker)
    finally:
        if proc is not None:
            iso.kill_group(proc.pid)
            proc.wait()
        iso.kill_marked(marker)
        if cgroup is not None:
            iso.remove_cgroup(cgroup)
        _remove(work)


def _layers(namespaces: bool, python_guards: bool) -> tuple[Optional[tuple[str, ...]], dict[str, str], list[str]]:
    missing: dict[str, str] = {}
    applied = ["rlimits", "wall-timeout", "output-cap", "scrubbed-environment", "capabilities-dropped"]
    prefix, why = iso.namespace_prefix() if namespaces else (None, "turned off by the caller")
    if prefix is None:
        missing["namespaces"] = why
    else:
        applied += ["pid-namespace", "network-namespace", "mount-namespace"]
    if python_guards:
        applied.append("python-guards")
    else:
        missing["python-guards"] = "turned off by the caller"
    return prefix, missing, applied


def _settings(limits: SandboxLimits, work: str, token: str, status_fd: int, namespaced: bool, guards: bool,
              cgroup: Optional[str]) -> dict[str, Any]:
    if os.geteuid() == 0 and not namespaced:
        nproc = None  # uid 0 is exempt; the cgroup (if any) counts
    elif namespaced:
        nproc = limits.processes  # counted per user namespace
    else:
        nproc = iso.user_tasks() + limits.processes  # counted over every process of this user
    return {"cpu_s": limits.cpu_s, "memory_mb": limits.memory_mb, "file_mb": limits.file_mb,
            "open_files": limits.open_files, "nproc": nproc, "work": work, "token": token, "status_fd": status_fd,
            "readonly": namespaced, "python_guards": guards, "cgroup": cgroup}


def _collect(proc: subprocess.Popen, status_r: int, limits: SandboxLimits) -> dict[str, Any]:
    """Read stdout, stderr and the status pipe until they close, the wall time runs out or the output overflows."""
    sel = selectors.DefaultSelector()
    streams = {proc.stdout.fileno(): "stdout", proc.stderr.fileno(): "stderr", status_r: "status"}
    kept = {"stdout": bytearray(), "stderr": bytearray(), "status": bytearray()}
    for fd in streams:
        os.set_blocking(fd, False)
        sel.register(fd, selectors.EVENT_READ)
    deadline = time.monotonic() + limits.wall_s
    total, why, grace = 0, "", None
    while sel.get_map():
        now = time.monotonic()
        if now > deadline:
            why = "timeout"
            break
        if grace is None and proc.poll() is not None:
            iso.kill_group(proc.pid)  # the program's process ended: nothing else of the run may go on
            grace = now + 1.0
        if grace is not None and now > grace:
            break
        for key, _ in sel.select(timeout=0.05):
            chunk = _read(key.fd)
            if chunk is None:
                continue
            if not chunk:
                sel.unregister(key.fd)
                continue
            name = streams[key.fd]
            if name != "status":
                total += len(chunk)
            room = (limits.kept_bytes if name != "status" else 1 << 16) - len(kept[name])
            kept[name] += chunk[:max(0, room)]
        if total > limits.output_bytes:
            why = "output"
            break
    iso.kill_group(proc.pid)
    sel.close()
    os.close(status_r)
    return {"why": why, **{k: bytes(v) for k, v in kept.items()}}


def _read(fd: int) -> Optional[bytes]:
    """A chunk, b"" at end of file, None when nothing is there yet."""
    try:
        return os.read(fd, 1 << 16)
    except BlockingIOError:
        return None
    except OSError:
        return b""


def _result(out: dict[str, Any], limits: SandboxLimits, token: str, applied: list[str],
            missing: dict[str, str], run_id: str) -> SandboxResult:
    lines = out["status"].decode("utf-8", "replace").splitlines()
    status: dict[str, Any] = {}
    for line in lines:
        if line.startswith("{"):
            status = json.loads(line)
    code = (status.get("status") or {}).get("exit")
    sig = (status.get("status") or {}).get("signal")
    applied = applied + status.get("applied", [])
    missing = {**missing, **status.get("missing", {})}
    stderr = out["stderr"].decode("utf-8", "replace")
    reason = _reason(out["why"], status, code, sig, token in lines, stderr, limits)
    return SandboxResult(reason == "passed", reason, code, sig, out["stdout"].decode("utf-8", "replace"), stderr,
                         round(out["wall_s"], 3), tuple(applied), missing, run_id)


def _reason(why: str, status: dict[str, Any], code: Optional[int], sig: Optional[int], finished: bool,
            stderr: str, limits: SandboxLimits) -> str:
    if why == "timeout":
        return f"wall time limit ({limits.wall_s:g} s)"
    if why == "output":
        return f"output limit ({limits.output_bytes} bytes of stdout + stderr)"
    last = next((line.strip() for line in reversed(stderr.splitlines()) if line.strip()), "")
    if not status:
        return f"sandbox failed to start: {last[:200] or 'no status'}"
    if sig is not None:
        reason = SIGNAL_REASONS.get(sig, f"killed by {signal.Signals(sig).name}")
        return f"{reason} ({limits.cpu_s} s)" if sig == signal.SIGXCPU else reason
    if code == 125 and last.startswith("sandbox setup failed"):
        return last[:300]
    if code != 0:
        return f"error: {last[:300]}" if last else f"exit status {code}"
    return "passed" if finished else "exited before the program's end (the tests did not all run)"


def _refused(reason: str) -> SandboxResult:
    return SandboxResult(False, reason, None, None, "", "", 0.0)


def _remove(work: str) -> None:
    """Remove the work folder, whatever permissions the program left on what it wrote."""
    def fix(func: Any, path: str, _exc: Any) -> None:
        try:
            os.chmod(os.path.dirname(path), 0o700)
            os.chmod(path, 0o700)
            func(path)
        except OSError:
            pass

    if sys.version_info >= (3, 12):
        shutil.rmtree(work, onexc=fix)
    else:
        shutil.rmtree(work, onerror=fix)
