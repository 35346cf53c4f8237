"""Argument checks every subcommand of `python -m s2d2` runs before any work, model load or optional import.

Each check raises ValueError with one line naming the argument and what it accepts; `__main__.main` prints it and
exits with status 2. Paths are checked for what the command will do with them (read a file, write a file, write
into a folder it may create), numbers against their range, optional extras by looking them up without importing
them (`importlib.util.find_spec`).
"""
from __future__ import annotations

import importlib.util
import math
import os
from typing import Any, Optional

from .limits import SEED_MAX, value_text


def whole(value: Any, name: str, lo: int, hi: int) -> int:
    """An int in [lo, hi]."""
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise ValueError(f"{name}: must be a whole number in [{lo}, {hi}], got {value_text(value)}")
    return value


def real(value: Any, name: str, lo: float, hi: float, lo_open: bool = False) -> float:
    """A finite float in [lo, hi] (or (lo, hi])."""
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) \
        and lo <= value <= hi and not (lo_open and value == lo)
    if not ok:
        raise ValueError(f"{name}: must be a number in {'(' if lo_open else '['}{lo:g}, {hi:g}], got "
                         f"{value_text(value)}")
    return float(value)


def seed(value: Any, name: str = "--seed") -> int:
    return whole(value, name, 0, SEED_MAX)


def readable_file(path: Optional[str], name: str) -> None:
    if not path or not os.path.isfile(path) or not os.access(path, os.R_OK):
        raise ValueError(f"{name}: no readable file at {value_text(path, 200)}")


def readable_folder(path: Optional[str], name: str) -> None:
    if not path or not os.path.isdir(path):
        raise ValueError(f"{name}: no folder at {value_text(path, 200)}")


def writable_file(path: Optional[str], name: str) -> None:
    """A file the command will create or overwrite: its folder exists and is writable, and it is not a folder."""
    if not path:
        return
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path) or not os.path.isdir(folder) or not os.access(folder, os.W_OK):
        raise ValueError(f"{name}: cannot write a file at {value_text(path, 200)} (give a file path in a writable "
                         "folder)")


def written_line(what: str, path: str, existed: bool) -> str:
    """The line a command prints after writing a file the user named: where it went, and that it replaced a file
    if one was there (an overwrite is said, never silent)."""
    return f"{what} written to {path}" + (" (it replaced the file that was there)" if existed else "")


def writable_folder(path: Optional[str], name: str) -> None:
    """A folder the command writes into, created if missing: it is not a file, and its nearest existing ancestor
    is a writable folder."""
    if not path:
        raise ValueError(f"{name}: give a folder")
    here = os.path.abspath(path)
    if os.path.exists(here) and not os.path.isdir(here):
        raise ValueError(f"{name}: {value_text(path, 200)} is a file, not a folder")
    while not os.path.exists(here):
        here = os.path.dirname(here)
    if not os.path.isdir(here) or not os.access(here, os.W_OK):
        raise ValueError(f"{name}: cannot write into {value_text(path, 200)} ({value_text(here, 200)} is not a "
                         "writable folder)")


def requirements(command: str, modules: tuple[str, ...], file: str) -> None:
    """The optional packages a command needs are installed (looked up, not imported)."""
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        raise ValueError(f"{command} needs {', '.join(missing)}: pip install -r {file}")
