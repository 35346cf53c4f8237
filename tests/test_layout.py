"""The house rules of the layout, checked on the source (no imports run).

- imports point down: app -> components -> s2d2; s2d2 never imports components, gradio or plotly;
- only s2d2/models/ imports transformers or peft (training code included);
- no import cycles between the project's modules (imports inside functions count: a lazy import hides a cycle);
- no private name (`_x`) imported from another module of the project;
- no module over 400 lines, no function over 60.
"""
from __future__ import annotations

import ast
import pathlib
from functools import lru_cache

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGES = ("s2d2", "components")
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60


def _module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


@lru_cache(maxsize=1)
def modules() -> dict[str, pathlib.Path]:
    files = [p for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py"))] + [ROOT / "app.py"]
    return {_module_name(p): p for p in files}


@lru_cache(maxsize=None)
def tree(name: str) -> ast.Module:
    return ast.parse(modules()[name].read_text(encoding="utf-8"))


def _resolve(name: str, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    is_pkg = modules()[name].name == "__init__.py"
    base = name.split(".")
    base = base if is_pkg else base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def imports(name: str) -> list[tuple[str, tuple[str, ...], int]]:
    """(imported module, names taken from it, line) for every import statement in the module, at any depth."""
    out = []
    for node in ast.walk(tree(name)):
        if isinstance(node, ast.Import):
            out += [(a.name, (), node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            out.append((_resolve(name, node), tuple(a.name for a in node.names), node.lineno))
    return out


def project_targets(name: str) -> set[str]:
    """The project modules this one imports (a `from pkg import mod` names the submodule)."""
    known = modules()
    out = set()
    for target, names, _ in imports(name):
        for cand in [f"{target}.{n}" for n in names] + [target]:
            if cand in known and cand != name:
                out.add(cand)
                break
    return out


def _top(target: str) -> str:
    return target.split(".")[0]


def test_library_imports_no_ui_and_only_models_import_transformers():
    bad = []
    for name in modules():
        for target, _, line in imports(name):
            top = _top(target)
            if name.startswith("s2d2") and top in ("gradio", "plotly", "components", "app"):
                bad.append(f"{name}:{line} imports {target}")
            if top in ("transformers", "peft") and not name.startswith("s2d2.models"):
                bad.append(f"{name}:{line} imports {target} (only s2d2/models/ may)")
            if name.startswith("components") and top == "app":
                bad.append(f"{name}:{line} imports app")
    assert not bad, "\n".join(bad)


def test_no_private_names_across_modules():
    known = modules()
    bad = []
    for name in known:
        for target, names, line in imports(name):
            if target in known and target != name:
                bad += [f"{name}:{line} imports {n} from {target}" for n in names
                        if n.startswith("_") and not n.startswith("__")]
    assert not bad, "\n".join(bad)


def _cycle(graph: dict[str, set[str]]) -> list[str]:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(n: str) -> list[str]:
        state[n] = 1
        stack.append(n)
        for m in sorted(graph.get(n, ())):
            if state.get(m) == 1:
                return stack[stack.index(m):] + [m]
            if m not in state:
                found = visit(m)
                if found:
                    return found
        stack.pop()
        state[n] = 2
        return []

    for n in sorted(graph):
        if n not in state:
            found = visit(n)
            if found:
                return found
    return []


def _package_parents(name: str) -> set[str]:
    parts = name.split(".")
    return {".".join(parts[:i]) for i in range(1, len(parts))}


def test_no_import_cycles():
    # A package's __init__ importing its own submodules is how a package exposes its API, not a cycle; an edge
    # from a submodule up to its own package's __init__ is one.
    graph = {n: {m for m in project_targets(n) if n not in _package_parents(m)} for n in modules()}
    assert _cycle(graph) == []


def test_cycle_finder_finds_a_cycle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) == []


@pytest.mark.parametrize("pkg", PACKAGES + ("app",))
def test_modules_and_functions_stay_small(pkg):
    bad = []
    for name, path in modules().items():
        if _top(name) != pkg:
            continue
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > MAX_MODULE_LINES:
            bad.append(f"{name}: {lines} lines (split it; the limit is {MAX_MODULE_LINES})")
        for node in ast.walk(tree(name)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    bad.append(f"{name}.{node.name}: {length} lines (the limit is {MAX_FUNCTION_LINES})")
    assert not bad, "\n".join(bad)
