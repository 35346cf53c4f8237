"""What the sandbox can isolate on this machine (probed once per process), and the sweeps that clean up after it.

* Namespaces: util-linux `unshare` with new PID (+ its own /proc), network and mount namespaces; as a normal user
  also a user namespace mapping the user to root inside it. Refused by some kernels and containers (e.g. Ubuntu's
  AppArmor restriction on unprivileged user namespaces): then the run goes ahead without them and says why.
* Process count: RLIMIT_NPROC, which the kernel does not apply to uid 0, so root runs also get a pids cgroup
  (cgroup v1 `pids`, or v2 with the pids controller) where one can be made.
* Cleanup: the process group is killed, then every process still carrying the run's marker in its environment,
  then every process left in its cgroup.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from functools import lru_cache
from typing import Optional

UNSHARE_FLAGS = ("--fork", "--pid", "--kill-child", "--mount-proc", "--net", "--mount", "--propagation", "private")
MARKER_ENV = "S2D2_SANDBOX"


@lru_cache(maxsize=1)
def namespace_prefix() -> tuple[Optional[tuple[str, ...]], str]:
    """The command prefix that runs a program in new PID, network and mount namespaces; else None and why not."""
    exe = shutil.which("unshare")
    if exe is None:
        return None, "util-linux `unshare` is not installed"
    cmd = (exe, *(() if os.geteuid() == 0 else ("--user", "--map-root-user")), *UNSHARE_FLAGS)
    try:
        proc = subprocess.run([*cmd, "true"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"unshare could not run ({type(exc).__name__})"
    if proc.returncode != 0:
        return None, f"the kernel refused new namespaces ({' '.join(proc.stderr.split())[:200]})"
    return cmd, ""


@lru_cache(maxsize=1)
def pids_cgroup_root() -> tuple[Optional[str], str]:
    """A cgroup hierarchy with the pids controller that this process may create groups in (root only)."""
    if os.geteuid() != 0:
        return None, "not needed: RLIMIT_NPROC applies to this user"
    v1 = "/sys/fs/cgroup/pids"
    if os.path.isfile(os.path.join(v1, "cgroup.procs")) and os.access(v1, os.W_OK):
        return v1, ""
    v2 = "/sys/fs/cgroup"
    try:
        with open(os.path.join(v2, "cgroup.subtree_control")) as fh:
            if "pids" in fh.read().split() and os.access(v2, os.W_OK):
                return v2, ""
    except OSError:
        pass
    return None, "no writable pids cgroup (uid 0 is exempt from RLIMIT_NPROC: only the wall time bounds a fork bomb)"


def make_cgroup(root: str, name: str, max_pids: int) -> str:
    path = os.path.join(root, name)
    os.mkdir(path)
    with open(os.path.join(path, "pids.max"), "w") as fh:
        fh.write(str(max_pids))
    return path


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


def user_tasks() -> int:
    """Processes and threads of this user now (RLIMIT_NPROC counts all of them)."""
    uid, total = os.getuid(), 0
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
