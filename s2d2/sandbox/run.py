"""Run one untrusted Python program in the sandbox and say whether it passed, and if not, why.

The program runs in a separate process, in a fresh temporary folder (its cwd, HOME and TMPDIR), with a scrubbed
environment and stdin from /dev/null, under these layers (the result lists what applied and why anything did not,
see isolation.py and child.py):

* bubblewrap: new user (uid nobody), PID, network (loopback only), mount, IPC and UTS namespaces; a read-only root
  with only /usr, Python's prefix, /dev and /proc; the work folder the one writable place; every capability dropped;
  a seccomp filter refusing socket(AF_UNIX) (x86_64, aarch64);
* limits: CPU seconds, address space, file size, open files, core dumps off, processes (RLIMIT_NPROC, and a pids
  cgroup for root), and the memory of all the run's processes together (a memory cgroup; without one each
  process gets memory_mb / processes of address space and the process cap shrinks to match);
* a wall-clock timeout after which every process of the run is killed (process group, bubblewrap's PID namespace,
  cgroups, marker); stdout + stderr capped (over the cap the run is killed); the run's processes are killed on every
  exit path, the death of the process calling run_program included (a parent-death signal kills the group);
* Python-level guards: no sockets, no writes outside the work folder, no ctypes libraries, no gc/frame walking.

Invariant: a sample passes only when the runner (which the program cannot write for) saw program.py run to its end
with exit status 0 and no SystemExit. Nothing runs unless the user opted in (S2D2_ALLOW_CODE_EVAL=1, or a CLI flag
that sets it), and nothing runs without bubblewrap unless the user also accepts less (S2D2_CODE_EVAL_ACCEPT_LESS=1,
or namespaces=False from a caller): the sandbox refuses, in one line, rather than silently weaken.
"""
from __future__ import annotations

import json
import os
import platform
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
ACCEPT_LESS_ENV = "S2D2_CODE_EVAL_ACCEPT_LESS"
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


def isolation_refusal() -> Optional[str]:
    """Why code may not run here (bubblewrap unavailable and less not accepted), in one line; None when it may."""
    exe, why = iso.bwrap_available()
    if exe is not None or os.environ.get(ACCEPT_LESS_ENV, "").strip() == "1":
        return None
    return (f"the code sandbox's isolation is unavailable: {why}; refusing to run model-written code without it "
            f"(set {ACCEPT_LESS_ENV}=1 to accept only rlimits and Python guards)")


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
    """Run `source` as __main__ in the sandbox; it passes when it runs to its end, with no SystemExit, exit 0.
    `namespaces` / `python_guards` = False turn those layers off (the caller accepts less; tests check each layer
    alone). CodeEvalRefused without the opt-in, or when bubblewrap is unavailable and less was not accepted."""
    require_code_eval()
    if namespaces and (refusal := isolation_refusal()) is not None:
        raise CodeEvalRefused(refusal)
    if len(source.encode("utf-8", "replace")) > MAX_SOURCE_BYTES:
        return _refused(f"program larger than {MAX_SOURCE_BYTES} bytes")
    marker = secrets.token_hex(8)
    work = os.path.realpath(tempfile.mkdtemp(prefix=f"s2d2-sandbox-{marker}-"))  # named by the run: checkable
    groups: list[str] = []
    proc: Optional[subprocess.Popen] = None
    try:
        Path(work, "program.py").write_text(source, encoding="utf-8")
        missing: dict[str, str] = {}
        applied = ["rlimits", "wall-timeout", "output-cap", "scrubbed-environment", "capabilities-dropped"]
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", iso.MARKER_ENV: marker}
        prefix, seccomp_fd = _namespace_layer(namespaces, work, env, applied, missing)
        inside = iso.INSIDE_WORK if prefix else work
        if prefix is None and os.geteuid() == 0:
            _nobody_layer(applied, missing)
        env.update(HOME=inside, TMPDIR=inside)
        groups = _cgroups(marker, limits, applied, missing)
        applied.append("python-guards") if python_guards else missing.update({"python-guards": "turned off"})
        if "uid-nobody" in applied:
            os.chown(work, iso.NOBODY_UID, iso.NOBODY_UID)  # the program's own folder (bubblewrap maps its nobody
            # to this user: there the folder stays ours, mode 0700)
        status_r, status_w = os.pipe()
        cfg = _settings(limits, inside, status_w, prefix is not None, python_guards, "memory-cgroup" in applied)
        cfg["parent"] = os.getpid() if prefix is None else None  # the runner dies with us (child.py)
        child = iso.INSIDE_CHILD if prefix else CHILD
        t0 = time.monotonic()
        proc = subprocess.Popen([*(prefix or ()), os.path.realpath(sys.executable), "-I", "-B", child], cwd=work,
                                env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                pass_fds=(status_w, *filter(None, [seccomp_fd])), start_new_session=True,
                                preexec_fn=(lambda: iso.join_cgroups(groups)) if groups else None)
        os.close(status_w)
        if seccomp_fd is not None:
            os.close(seccomp_fd)
        proc.stdin.write(json.dumps(cfg).encode())
        proc.stdin.close()
        out = _collect(proc, status_r, limits)
        out["wall_s"] = time.monotonic() - t0
        return _result(out, limits, applied, missing, marker)
    finally:
        if proc is not None:
            iso.kill_group(proc.pid)
            proc.wait()
        iso.kill_marked(marker)
        for group in groups:
            iso.remove_cgroup(group)
        _remove(work)


def _namespace_layer(namespaces: bool, work: str, env: dict[str, str], applied: list[str],
                     missing: dict[str, str]) -> tuple[Optional[list[str]], Optional[int]]:
    """(bubblewrap's argv prefix, the descriptor of its seccomp filter, for the child to inherit), or (None, None)
    when the caller accepted less, with the reason in `missing`."""
    if not namespaces:
        missing["namespaces"] = "turned off by the caller"
        return None, None
    program = iso.seccomp_filter() if iso.bwrap_available()[0] else None
    fd = None
    if program is not None:
        fd, writer = os.pipe()
        os.write(writer, program)  # 72 bytes: far below a pipe's buffer
        os.close(writer)
    prefix = iso.bwrap_command(work, CHILD, {**env, "HOME": iso.INSIDE_WORK, "TMPDIR": iso.INSIDE_WORK}, fd)
    if prefix is None:
        missing["namespaces"] = iso.bwrap_available()[1] + f" ({ACCEPT_LESS_ENV}=1 accepted less)"
        return None, None
    applied += ["bubblewrap", "user-namespace", "pid-namespace", "network-namespace", "mount-namespace",
                "read-only-filesystem"]
    if fd is None:
        missing["no-unix-sockets"] = f"no seccomp filter for {platform.machine()}"
    else:
        applied.append("no-unix-sockets")
    return prefix, fd


def _nobody_layer(applied: list[str], missing: dict[str, str]) -> None:
    """Root without bubblewrap: the program runs as nobody, so it cannot signal the runner or this process."""
    if iso.nobody_can_run_python():
        applied.append("uid-nobody")
    else:
        missing["uid-nobody"] = "uid nobody cannot reach this Python's prefix: the program runs as root, capless"


def _cgroups(marker: str, limits: SandboxLimits, applied: list[str], missing: dict[str, str]) -> list[str]:
    """A pids and a memory group for this run where this machine allows them (their layer names in `applied`)."""
    groups = []
    for controller, limit in (("pids", limits.processes), ("memory", limits.memory_mb * 1024 * 1024)):
        root, why = iso.cgroup_root(controller)
        if root is None:
            missing[f"{controller}-cgroup"] = why
            continue
        try:
            groups.append(iso.make_cgroup(root, f"s2d2-sandbox-{marker}", controller, limit))
            applied.append(f"{controller}-cgroup")
        except OSError as exc:
            missing[f"{controller}-cgroup"] = f"could not make one under {root} ({exc.strerror})"
    return groups


def _settings(limits: SandboxLimits, work: str, status_fd: int, namespaced: bool, guards: bool,
              memory_group: bool) -> dict[str, Any]:
    """The runner's settings. Without a memory group the memory budget is split over the processes, so all of
    them together still stay under memory_mb (and the process cap shrinks until each gets at least 128 MiB)."""
    processes, memory = limits.processes, limits.memory_mb
    if not memory_group:
        memory = max(limits.memory_mb // limits.processes, min(128, limits.memory_mb))
        processes = max(1, min(limits.processes, limits.memory_mb // memory))
    to_nobody = os.geteuid() == 0 and not namespaced and iso.nobody_can_run_python()
    if namespaced:
        nproc = processes  # uid nobody of a fresh user namespace: only this run's processes count
    else:  # counted over every process of the user the program runs as (other runs' too)
        nproc = iso.user_tasks(iso.NOBODY_UID if to_nobody else os.getuid()) + processes
    return {"cpu_s": limits.cpu_s, "memory_mb": memory, "file_mb": limits.file_mb,
            "open_files": limits.open_files, "nproc": nproc, "work": work, "status_fd": status_fd,
            "python_guards": guards, "to_nobody": to_nobody}


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


def _result(out: dict[str, Any], limits: SandboxLimits, applied: list[str], missing: dict[str, str],
            run_id: str) -> SandboxResult:
    status: dict[str, Any] = {}
    for line in out["status"].decode("utf-8", "replace").splitlines():
        if line.startswith("{"):
            status = json.loads(line)
    code = (status.get("status") or {}).get("exit")
    sig = (status.get("status") or {}).get("signal")
    stderr = out["stderr"].decode("utf-8", "replace")
    reason = _reason(out["why"], status, code, sig, status.get("finished") is True, stderr, limits)
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
        return f"the sandbox's runner ended without a verdict (killed?): {last[:200] or 'no status'}"
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
