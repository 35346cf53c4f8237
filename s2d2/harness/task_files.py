"""Check the task folder and task files lm-eval is given, before lm-eval reads them.

lm-eval indexes every YAML under `--include_path` (os.walk, unbounded) and its `!function module.name` tag imports
and runs that Python file when the task loads: a task folder is code. So, before lm-eval is imported:

* the walk is bounded: at most MAX_ENTRIES files and folders and MAX_DEPTH levels under the folder (`/` or a home
  folder is refused at once, in one line, instead of a minutes-long scan);
* every task YAML there (and every YAML named in `--tasks`, and every file they `include:`) is composed with
  PyYAML, which resolves %TAG shorthands and %-escapes, and any `!function` tag is refused unless the user passed
  --trust_task_code. The folder shipped with this project (assets/tasks/lm_eval) is trusted: its Python is ours.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Iterator, Optional

MAX_ENTRIES = 5000
MAX_DEPTH = 8
MAX_YAML_BYTES = 1 << 20
MAX_INCLUDES = 64
SHIPPED = (Path(__file__).resolve().parents[2] / "assets" / "tasks" / "lm_eval").resolve()
TRUST_FLAG = "--trust_task_code"


def check_task_sources(include_path: Optional[str], tasks: list[str], trust: bool) -> None:
    """ValueError (one line) when the folder is too large to index, or a task file runs Python without `trust`."""
    files: list[Path] = []
    if include_path is not None:
        files += list(_yaml_files(Path(include_path)))
    files += [Path(t) for t in tasks if t.endswith((".yaml", ".yml")) and os.path.isfile(t)]
    if trust:
        return
    seen: set[Path] = set()
    queue = [f.resolve() for f in files]
    while queue:
        path = queue.pop()
        if path in seen or path.is_relative_to(SHIPPED):
            continue
        seen.add(path)
        if len(seen) > MAX_ENTRIES + MAX_INCLUDES:
            raise ValueError(f"task files: more than {MAX_ENTRIES + MAX_INCLUDES} YAML files to check")
        function, includes = _scan(path)
        if function:
            raise ValueError(f"task file {path}: `!function` runs Python from that folder when the task loads; "
                             f"pass {TRUST_FLAG} if you trust it")
        queue += [p for p in includes if p.is_file()]


def _yaml_files(root: Path) -> Iterator[Path]:
    """The YAML files under `root`, walking at most MAX_ENTRIES entries and MAX_DEPTH levels (ValueError past)."""
    entries = 0
    base = len(root.resolve().parts)
    for folder, dirs, names in os.walk(root):
        depth = len(Path(folder).resolve().parts) - base
        entries += len(dirs) + len(names)
        if entries > MAX_ENTRIES or depth > MAX_DEPTH:
            raise ValueError(f"--include_path: {str(root)[:200]!r} holds more than {MAX_ENTRIES} files or is deeper "
                             f"than {MAX_DEPTH} levels; give the folder that holds the task YAMLs")
        dirs.sort()
        for name in sorted(names):
            if name.endswith((".yaml", ".yml")):
                yield Path(folder) / name


def _scan(path: Path) -> tuple[bool, list[Path]]:
    """(does the file use a `!function` tag, the files its `include:` keys name)."""
    import yaml

    if path.stat().st_size > MAX_YAML_BYTES:
        raise ValueError(f"task file {path}: larger than {MAX_YAML_BYTES >> 20} MB")
    text = path.read_text(encoding="utf-8", errors="replace")
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        raise ValueError(f"task file {path}: not valid YAML{where}") from None
    function, includes, stack = False, [], [root] if root is not None else []
    while stack:
        node = stack.pop()
        function |= node.tag == "!function"
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                if isinstance(key, yaml.ScalarNode) and key.value == "include" and isinstance(value, yaml.ScalarNode):
                    includes.append((path.parent / value.value).resolve())
                stack += [key, value]
        elif isinstance(node, yaml.SequenceNode):
            stack += node.value
    return function, includes
