"""What the sandbox can isolate on this machine (probed once per process), and the sweeps that clean up after it.

* bubblewrap (`bwrap`, Debian package `bubblewrap`): new user, PID, network, mount, IPC and UTS namespaces, every
  capability dropped, no_new_privs, --die-with-parent; the new root is a read-only tmpfs holding only Python's own
  prefix and /usr (read-only), /dev, its own /proc, and the work folder (the one writable place). Nothing of the
  repository, /etc, /tmp or any home is visible; a seccomp filter refuses socket(AF_UNIX). Refused by some
  kernels and containers (unprivileged user namespaces off): then the sandbox refuses to run code unless the user
  accepts less (run.py).
* cgroups (root only): a pids group and a memory group per run, so the process count and the memory of all the
  run's processes together are capped; v1 hierarchies, or v2 with the controllers enabled.
* Cleanup: the process group is killed, then every process still carrying the run's marker in its environment,
  then every process left in its cgroups.
"""
from __future__ import annotations

import os
import platform
import shutil
import signal
import struct
import subprocess
import sys
import time
from functools import lru_cache
from typing import Optional

MARKER_ENV = "S2D2_SANDBOX"
INSIDE_WORK = "/sandbox/work"  # the work folder's path inside bubblewrap
INSIDE_CHILD = "/sandbox/child.py"
NOBODY_UID = 65534
NOBODY = str(NOBODY_UID)
BWRAP_FLAGS = ("--unshare-user", "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts",
               "--unshare-cgroup-try", "--uid", NOBODY, "--gid", NOBODY, "--die-with-parent", "--new-session",
               "--cap-drop", "ALL", "--hostname", "sandbox", "--clearenv")


def python_binds() -> list[str]:
    """Read-only binds that let this Python start: /usr, the interpreter's prefix, and the /lib links."""
    args = ["--ro-bind", "/usr", "/usr"]
    for link in ("/bin", "/lib", "/lib64", "/sbin"):
        if os.path.islink(link):
            args += ["--symlink", os.readlink(link), link]
        elif os.path.isdir(link):
            args += ["--ro-bind", link, link]
    for prefix in sorted({os.path.realpath(sys.base_prefix), os.path.realpath(sys.base_exec_prefix)}):
        if prefix != "/usr" and not prefix.startswith("/usr/"):
            args += ["--ro-bind", prefix, prefix]
    return args


# (audit arch, socket syscall number) of the machines the seccomp filter knows
SECCOMP_ARCHES = {"x86_64": (0xC000003E, 41), "aarch64": (0xC00000B7, 198)}
AF_UNIX, EAFNOSUPPORT, X32_BIT = 1, 97, 0x40000000


def seccomp_filter() -> Optional[bytes]:
    """A classic-BPF seccomp program refusing socket(AF_UNIX, ...) with EAFNOSUPPORT (and every syscall of a foreign
    ABI), so no path or abstract Unix socket outside can be reached whatever the mounts; None on another machine."""
    arch = SECCOMP_ARCHES.get(platform.machine())
    if arch is None:
        return None
    audit_arch, nr_socket = arch
    ld, jeq, jge, ret = 0x20, 0x15, 0x35, 0x06
    allow, deny = 0x7FFF0000, 0x00050000 | EAFNOSUPPORT
    program = [(ld, 0, 0, 4),               # 0: A = arch
               (jeq, 0, 6, audit_arch),     # 1: a foreign ABI -> 8
               (ld, 0, 0, 0),               # 2: A = syscall number
               (jge, 4, 0, X32_BIT),        # 3: an x32 syscall -> 8
               (jeq, 0, 2, nr_socket),      # 4: not socket() -> 7
               (ld, 0, 0, 16),              # 5: A = its first argument (low 32 bits), the family
               (jeq, 1, 0, AF_UNIX),        # 6: AF_UNIX -> 8
               (ret, 0, 0, allow),          # 7
               (ret, 0, 0, deny)]           # 8
    return b"".join(struct.pack("=HBBI", *op) for op in program)


def bwrap_command(work: str, child: str, env: dict[str, str], seccomp_fd: Optional[int] = None
                  ) -> Optional[list[str]]:
    """The bwrap argv (without the program) for one run, or None when bubblewrap is unavailable; `seccomp_fd`
    is a readable descriptor holding seccomp_filter()."""
    exe, _ = bwrap_available()
    if exe is None:
        return None
    cmd = [exe, *BWRAP_FLAGS, *(("--seccomp", str(seccomp_fd)) if seccomp_fd is not None else ()), *python_binds(),
           "--proc", "/proc", "--dev", "/dev", "--dir", "/tmp",
           "--bind", work, INSIDE_WORK, "--ro-bind", child, INSIDE_CHILD, "--chdir", INSIDE_WORK]
    for key, value in env.items():
        cmd += ["--setenv", key, value]
    return [*cmd, "--remount-ro", "/"]


@lru_cache(maxsize=1)
def bwrap_available() -> tuple[Optional[str], str]:
    """bubblewrap's path when it runs here with every namespace we ask for; else None and why not."""
    exe = shutil.which("bwrap")
    if exe is None:
        return None, "bubblewrap (bwrap) is not installed (Debian: apt-get install bubblewrap)"
    probe = [exe, *BWRAP_FLAGS, *python_binds(), "--proc", "/proc", "--dev", "/dev", "--remount-ro", "/",
             os.path.realpath(sys.executable), "-I", "-S", "-c", "pass"]
    try:
        proc = subprocess.run(probe, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"bubblewrap could not run ({type(exc).__name__})"
    if proc.returncode != 0:
        return None, f"the kernel refused bubblewrap's namespaces ({' '.join(proc.stderr.split())[:200]})"
    return exe, ""


@lru_cache(maxsize=1)
def nobody_can_run_python() -> bool:
    """Whether uid nobody can run this Python (every folder above its prefix searchable by others)."""
    for start in {os.path.realpath(sys.executable), os.path.realpath(sys.base_prefix)}:
        path = start
        while path != "/":
            path = os.path.dirname(path)
            if not os.stat(path).st_mode & 0o001:
                return False
    return True


CONTROLLERS = {"pids": ("pids.max",), "memory": ("memory.limit_in_bytes", "memory.max")}


@lru_cache(maxsize=2)
def cgroup_root(controller: str) -> tuple[Optional[str], str]:
    """A cgroup hierarchy with `controller` ("pids" or "memory") that this process may create groups in."""
    if os.geteuid() != 0:
        return None, "cgroups need root here"
    v1 = f"/sys/fs/cgroup/{controller}"
    if os.path.isfile(os.path.join(v1, "cgroup.procs")) and os.access(v1, os.W_OK):
        return v1, ""
    v2 = "/sys/fs/cgroup"
    try:
        with open(os.path.join(v2, "cgroup.subtree_control")) as fh:
            if controller in fh.read().split() and os.access(v2, os.W_OK):
                return v2, ""
    except OSError:
        pass
    return None, f"no writable {controller} cgroup"


def pids_cgroup_root() -> tuple[Optional[str], str]:
    """The pids hierarchy (kept for callers that check what a run left behind)."""
    return cgroup_root("pids")


def make_cgroup(root: str, name: str, controller: str, limit: int) -> str:
    """A new group under `root` capped at `limit` (processes, or bytes of memory with swap included)."""
    path = os.path.join(root, name)
    os.mkdir(path)
    try:
        if controller == "pids":
            _write(os.path.join(path, "pids.max"), str(limit))
        elif os.path.exists(os.path.join(path, "memory.limit_in_bytes")):
            _write(os.path.join(path, "memory.limit_in_bytes"), str(limit))
            if os.path.exists(os.path.join(path, "memory.memsw.limit_in_bytes")):
                _write(os.path.join(path, "memory.memsw.limit_in_bytes"), str(limit))
        else:
            _write(os.path.join(path, "memory.max"), str(limit))
            if os.path.exists(os.path.join(path, "memory.swap.max")):
                _write(os.path.join(path, "memory.swap.max"), "0")
    except OSError:
        os.rmdir(path)
        raise
    return path


def join_cgroups(paths: list[str]) -> None:
    """Move the calling process into each group (run in the child between fork and exec)."""
    for path in paths:
        _write(os.path.join(path, "cgroup.procs"), "0")


def _write(path: str, text: str) -> None:
    with open(path, "w") as fh:
        fh.write(text)


def remove_cgroup(path: str) -> None:
    """Kill every process left in the group, then remove it (retrying while the kernel finishes the kills)."""
    for _ in range(200):
        for pid in _read_pids(os.path.join(path, "cgroup.procs")):
            _kill(pid)
        try:
            os.rmdir(path)
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.01)


def kill_marked(marker: str, rounds: int = 100) -> int:
    """SIGKILL every process whose environment carries the run's marker, until none is left; how many were."""
    needle = f"{MARKER_ENV}={marker}".encode()
    killed = 0
    for _ in range(rounds):
        found = [pid for pid in _all_pids() if needle in _environ(pid)]
        if not found:
            return killed
        for pid in found:
            _kill(pid)
        killed += len(found)
        time.sleep(0.01)
    return killed


def marked_processes(marker: str) -> list[int]:
    needle = f"{MARKER_ENV}={marker}".encode()
    return [pid for pid in _all_pids() if needle in _environ(pid)]


def user_tasks(uid: int) -> int:
    """Processes and threads of `uid` now (RLIMIT_NPROC counts all of them)."""
    total = 0
    for pid in _all_pids():
        try:
            if os.stat(f"/proc/{pid}").st_uid == uid:
                total += len(os.listdir(f"/proc/{pid}/task"))
        except OSError:
            continue
    return total


def kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _all_pids() -> list[int]:
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def _environ(pid: int) -> list[bytes]:
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            return fh.read().split(b"\0")
    except OSError:
        return []


def _read_pids(path: str) -> list[int]:
    try:
        with open(path) as fh:
            return [int(line) for line in fh if line.strip()]
    except OSError:
        return []


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
