"""The app's files on disk: one cache folder per run, wiped of earlier runs at start, under a byte budget.

Uploads, downloads and exported traces all live under `S2D2_CACHE_DIR` (default `<tmp>/s2d2-cache`), in a folder
of this process (`run-<pid>/`: Gradio's cache, `GRADIO_TEMP_DIR`, unless the operator set one, with the exports
inside it, so a download is served in place, not copied). At start every `run-*` folder whose process is gone is
deleted: a crash or a kill leaves nothing behind for long, and two apps on one machine never delete each other's
files. The bytes are bounded while the app runs:
- S2D2_DISK_MB (default 1024) for all of them: over it, the oldest files (older than a minute, so nothing in
  flight) are deleted first, and an upload that still does not fit is refused;
- S2D2_CLIENT_UPLOAD_MB (default 60) per client and hour of uploads (components/serve/identity.py keys the client).
components/serve/front_door.py asks `admit_upload` before Gradio reads an upload.
"""
from __future__ import annotations

import os
import shutil
import tempfile
import threading
import time
from collections import deque
from pathlib import Path
from typing import Iterator, Optional

from components.serve.settings import env_megabytes

MIN_AGE_S = 60.0  # files younger than this are never pruned (an upload being read, a download being fetched)
WINDOW_S = 3600.0  # the per-client upload allowance is per hour
SCAN_EVERY_S = 2.0  # the folder is re-measured at most this often (between scans admitted bytes are added)
_PREPARED = False


def disk_budget_bytes() -> int:
    return env_megabytes("S2D2_DISK_MB", 1024)


def client_upload_bytes() -> int:
    return env_megabytes("S2D2_CLIENT_UPLOAD_MB", 60)


def cache_root() -> Path:
    return Path(os.environ.get("S2D2_CACHE_DIR") or Path(tempfile.gettempdir()) / "s2d2-cache")


def prepare_cache() -> Path:
    """Delete the folders of runs that are gone, create this run's, and point Gradio's cache at it (unless
    GRADIO_TEMP_DIR is set). Returns the folder Gradio writes to."""
    global _PREPARED
    root = cache_root()
    root.mkdir(parents=True, exist_ok=True)
    if not _PREPARED:  # once per process: a second app built in it keeps the first one's files
        wipe_dead_runs(root)
        _PREPARED = True
    mine = root / f"run-{os.getpid()}"
    mine.mkdir(exist_ok=True)
    os.environ.setdefault("GRADIO_TEMP_DIR", str(mine / "gradio"))
    Path(os.environ["GRADIO_TEMP_DIR"]).mkdir(parents=True, exist_ok=True)
    return Path(os.environ["GRADIO_TEMP_DIR"])


def wipe_dead_runs(root: Path) -> int:
    """Delete `run-<pid>` folders under root whose process no longer runs (and this process's own, which is
    starting afresh); returns how many."""
    removed = 0
    for folder in root.glob("run-*"):
        try:
            pid = int(folder.name[4:])
        except ValueError:
            continue
        if pid == os.getpid() or not _alive(pid):
            shutil.rmtree(folder, ignore_errors=True)
            removed += 1
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def gradio_dir() -> Path:
    """Gradio's cache (uploads and downloads), as Gradio reads it."""
    return Path(os.environ.get("GRADIO_TEMP_DIR") or Path(tempfile.gettempdir()) / "gradio")


def export_dir() -> Path:
    """The one folder exported traces are written to (created on demand): S2D2_EXPORT_DIR, else inside Gradio's
    cache, where a download is served without a copy."""
    d = Path(os.environ.get("S2D2_EXPORT_DIR") or gradio_dir() / "s2d2-exports")
    d.mkdir(parents=True, exist_ok=True)
    return d


class DiskBudget:
    """Bytes under the app's folders, with a total cap (pruning the oldest files) and a per-client upload cap."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._uploads: dict[str, deque[tuple[float, int]]] = {}  # client -> (time, bytes) in the last hour
        self._used, self._scanned = 0, -SCAN_EVERY_S

    def folders(self) -> list[Path]:
        out = [gradio_dir()]
        exports = export_dir()
        if not any(exports == f or f in exports.parents for f in out):
            out.append(exports)
        return out

    def usage(self, fresh: bool = False) -> int:
        now = time.monotonic()
        if fresh or now - self._scanned >= SCAN_EVERY_S:
            self._used, self._scanned = sum(size for _, size, _ in self._files()), now
        return self._used

    def admit_upload(self, client: str, nbytes: int) -> Optional[str]:
        """None and the bytes charged, or the message refusing an upload of `nbytes` from `client`."""
        with self._lock:
            now = time.monotonic()
            recent = self._uploads.setdefault(client, deque())
            while recent and now - recent[0][0] > WINDOW_S:
                recent.popleft()
            allowance = client_upload_bytes()
            if sum(b for _, b in recent) + nbytes > allowance:
                return (f"Upload refused: at most {allowance // 2**20} MB of uploads per visitor and hour. Try "
                        "again later.")
            if not self.make_room(nbytes):
                return "Upload refused: the server's upload space is full. Try again in a few minutes."
            recent.append((now, nbytes))
            self._used += nbytes
            if len(self._uploads) > 10_000:  # forget the quietest clients first
                for key in [k for k, v in self._uploads.items() if not v][:5_000]:
                    del self._uploads[key]
            return None

    def make_room(self, nbytes: int) -> bool:
        """Delete the oldest files (older than MIN_AGE_S) until `nbytes` more fit the budget; whether they fit."""
        budget = disk_budget_bytes()
        if self.usage() + nbytes <= budget:
            return True
        files = sorted(self._files(), key=lambda f: f[2])
        used = sum(size for _, size, _ in files)
        cutoff = time.time() - MIN_AGE_S
        for path, size, mtime in files:
            if used + nbytes <= budget or mtime > cutoff:
                break
            try:
                path.unlink()
                used -= size
            except OSError:
                continue
        self._used, self._scanned = used, time.monotonic()
        return used + nbytes <= budget

    def _files(self) -> Iterator[tuple[Path, int, float]]:
        """Every file under the folders (a file linked under two names counts its bytes once)."""
        seen: set[tuple[int, int]] = set()
        for folder in self.folders():
            for dirpath, _, names in os.walk(folder):
                for name in names:
                    path = Path(dirpath) / name
                    try:
                        st = path.stat()
                    except OSError:
                        continue
                    first = (st.st_dev, st.st_ino) not in seen
                    seen.add((st.st_dev, st.st_ino))
                    yield path, st.st_size if first else 0, st.st_mtime


DISK = DiskBudget()
