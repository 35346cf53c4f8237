"""The house rules of the layout, checked on the source (no imports run).

- imports point down: app -> components -> s2d2; s2d2 never imports components, gradio or plotly;
- components/ is a handful of packages by role, each allowed its own imports (ROLES below): views/ never import
  gradio, serve/ imports no view, file or tab, files/ no tab, a tab the views, files, serve and the library (and
  the Run tab's decodes, which Compare and Replay run too), never another tab's layout or handlers;
- nothing ships code that imports tests/, benchmarks/, fixtures/ or scripts/; benchmarks/ imports nothing from tests/;
  no test module imports another (helpers live in tests/support/, fixtures/);
- no sys.path edits anywhere, every module has a docstring, every package's __init__ says which module to read first;
- only s2d2/models/ imports transformers or peft (training code included);
- no import cycles between the project's modules (imports inside functions count: a lazy import hides a cycle);
- no private name (`_x`) imported from another module of the project;
- no module over 400 lines, no function over 60 (tests/ aside).
"""
from __future__ import annotations

import ast
import pathlib
from functools import lru_cache

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGES = ("s2d2", "components")
EVERYWHERE = ("s2d2", "components", "fixtures", "benchmarks", "scripts", "tests")  # cycles, sys.path, docstrings
SIZE_RULED = PACKAGES + ("app", "benchmarks", "scripts", "fixtures")  # top-level names, as _top() gives them
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60


def _module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


@lru_cache(maxsize=1)
def modules() -> dict[str, pathlib.Path]:
    files = [p for pkg in EVERYWHERE for p in sorted((ROOT / pkg).rglob("*.py")) if "data" not in p.parts]
    return {_module_name(p): p for p in files + [ROOT / "app.py"]}


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


def shipped() -> list[str]:
    """The modules the app and the library are made of (what a Space runs and `pip install` would ship)."""
    return [n for n in modules() if _top(n) in PACKAGES + ("app",)]


def test_library_imports_no_ui_and_only_models_import_transformers():
    bad = []
    for name in shipped():
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
    for name in shipped():
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


@pytest.mark.parametrize("pkg", SIZE_RULED)
def test_modules_and_functions_stay_small(pkg):
    ruled = {name: path for name, path in modules().items() if _top(name) == pkg}
    assert ruled, f"no module is named {pkg}.*: the size rule would check nothing there"
    bad = []
    for name, path in ruled.items():
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > MAX_MODULE_LINES:
            bad.append(f"{name}: {lines} lines (split it; the limit is {MAX_MODULE_LINES})")
        for node in ast.walk(tree(name)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    bad.append(f"{name}.{node.name}: {length} lines (the limit is {MAX_FUNCTION_LINES})")
    assert not bad, "\n".join(bad)


# --- components/ by role ------------------------------------------------------------------------------------------

TABS = ("replay", "run", "compare", "tour", "sweep")
SHARED = ("components", "components.escape", "components.ui", "components.theme")  # text made inert, Gradio glue, the look
# role -> the components packages its modules may import (besides their own package, SHARED and s2d2)
ROLES = {
    "serve": (),
    "views": (),
    "files": ("views", "serve"),
    **{tab: ("views", "files", "serve") for tab in TABS},
}
# A tab may use the Run tab's decodes and knobs (Compare and Replay run the same validated, GPU-decorated decodes);
# nothing else crosses from one tab to another.
SHARED_TAB_MODULES = ("components.run.knobs", "components.run.config_check", "components.run.workers",
                      "components.run.zerogpu", "components.run.knob_scope", "components.run.lane_rounds",
                      "components.run.random_stream")  # the stream a decode of a model draws from, Run's or Compare's


def _role(name: str) -> str:
    parts = name.split(".")
    return parts[1] if len(parts) > 2 or (len(parts) == 2 and parts[1] in ROLES) else ""


def test_components_is_packages_by_role():
    flat = [n for n in modules() if n.startswith("components.") and n.count(".") == 1 and n not in SHARED
            and n.split(".")[1] not in ROLES]
    assert not flat, f"modules outside the role packages {sorted(ROLES)}: {flat}"
    stray = sorted({n.split(".")[1] for n in modules() if n.count(".") >= 2 and n.startswith("components.")}
                   - set(ROLES))
    assert not stray, f"packages in components/ that have no rule here: {stray}"


def test_each_role_imports_only_what_it_may():
    bad = []
    for name in modules():
        role = _role(name) if name.startswith("components.") else ""
        if not role:
            continue
        allowed = {role, *ROLES[role]}
        for target in project_targets(name):
            if not target.startswith("components.") or target in SHARED:
                continue
            other = _role(target)
            if other not in allowed and not (role in TABS and target in SHARED_TAB_MODULES):
                bad.append(f"{name} imports {target} ({role}/ may import {sorted(allowed)})")
        if role == "views":
            bad += [f"{name}:{line} imports {t} (views are pure: no gradio)" for t, _, line in imports(name)
                    if _top(t) == "gradio"]
    assert not bad, "\n".join(bad)


def test_shipped_code_imports_no_tests_benchmarks_or_scripts():
    bad = []
    for name in modules():
        forbidden = {"tests", "benchmarks", "fixtures", "scripts"} if name in shipped() else set()
        if _top(name) == "benchmarks":
            forbidden = {"tests"}
        if _top(name) == "fixtures":
            forbidden = {"tests", "benchmarks"}
        bad += [f"{name}:{line} imports {t}" for t, _, line in imports(name) if _top(t) in forbidden]
    assert not bad, "\n".join(bad)


def test_no_test_module_imports_another():
    bad = [f"{name}:{line} imports {t}" for name in modules() if _top(name) == "tests"
           for t, names, line in imports(name)
           for cand in [t] + [f"{t}.{n}" for n in names]
           if cand.rsplit(".", 1)[-1].startswith("test_") and cand in modules()]
    assert not bad, "\n".join(bad)


def _edits_sys_path(node: ast.AST) -> bool:
    target = node.func.value if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) else None
    if isinstance(node, (ast.Assign, ast.AugAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        return any(ast.unparse(t).startswith("sys.path") for t in targets)
    return target is not None and ast.unparse(target) == "sys.path"


def test_no_sys_path_edits():
    """Every entry point runs as a module from the repository root (`python -m benchmarks.NAME`, pytest's
    `pythonpath = ["."]`), so no file reaches another by editing the import path."""
    bad = [f"{name}:{node.lineno}" for name in modules() for node in ast.walk(tree(name)) if _edits_sys_path(node)]
    assert not bad, "\n".join(bad)


def test_the_sys_path_check_sees_an_edit():
    assert _edits_sys_path(ast.parse("sys.path.insert(0, 'x')").body[0].value)
    assert _edits_sys_path(ast.parse("sys.path[:0] = ['x']").body[0])
    assert not _edits_sys_path(ast.parse("print(sys.path)").body[0].value)


def test_every_module_has_a_docstring():
    bad = [name for name in modules() if ast.get_docstring(tree(name)) is None]
    assert not bad, f"modules without a docstring (say what it is for): {bad}"


def test_every_components_package_says_which_module_to_read_first():
    bad = []
    for name, path in modules().items():
        if path.name != "__init__.py" or not name.startswith("components."):
            continue
        doc = ast.get_docstring(tree(name)) or ""
        first = [w for w in doc.replace("(", " ").replace(")", " ").split() if w.endswith(".py")]
        if "first" not in doc or not first or not all((path.parent / w.rstrip(".,;")).is_file() for w in first):
            bad.append(f"{name}: {doc!r}")
    assert not bad, "\n".join(bad)
