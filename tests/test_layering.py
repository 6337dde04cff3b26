"""The package's layering, enforced (issue 17): the simulator and the policies are numpy only,
the subpackages import each other one way, and importing simspec changes nothing outside it.

Dependency rule (simspec/<subpackage>):
- sim, policies (and stats, shipped, errors, data) never import torch, transformers or
  stable-baselines3, nor engine / measure / distill / train / report / cli;
- policies never imports sim (the simulator drives policies, not the reverse);
- engine (models, drafters, the tree engine) never imports sim / measure / distill / train / cli;
- no cycle between subpackages, nor between the modules of one package.

The import graph is read from the source with ``ast`` (imports at module level and inside
functions alike); the ``sys.modules`` and ``os.environ`` checks run in fresh interpreters."""

from __future__ import annotations

import ast
import functools
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from helpers import HEAVY, NUMPY_ONLY

ROOT = Path(__file__).resolve().parents[1]
NUMPY_ONLY_PACKAGES = ("sim", "policies", "stats", "shipped", "errors", "data")
NEVER = {
    "sim": {"engine", "measure", "distill", "train", "report", "cli"},
    "policies": {"engine", "measure", "distill", "train", "report", "cli", "sim"},
    "engine": {"sim", "measure", "distill", "train", "cli"},
}
# The simulator's test modules and their shared helpers: numpy only, like what they test.
NUMPY_ONLY_TESTS = ("helpers", *(name.removesuffix(".py") for name in NUMPY_ONLY))


def modules(root: Path = ROOT) -> dict[str, Path]:
    """Every module of the simspec package under ``root``, by dotted name."""
    out = {}
    for path in sorted((root / "simspec").rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def imports(root: Path = ROOT, run_time: bool = False) -> dict[str, set[str]]:
    """module -> the simspec modules it imports, anywhere in its source; ``run_time``: less those
    under ``if TYPE_CHECKING:`` (annotations only: never executed)."""
    known = modules(root)

    def resolve(name: str) -> str | None:  # `simspec.sim.replay.replay` -> `simspec.sim.replay`
        while name and name not in known:
            name = name.rpartition(".")[0]
        return name or None

    graph = {}
    for module, path in known.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        names = imported_names(path.read_text(), package)[1 if run_time else 0]
        graph[module] = {r for n in names if n.split(".")[0] == "simspec" and (r := resolve(n)) and r != "simspec"}
    return graph


@functools.cache  # the checks parse each source several times, and a copy of the package again
def imported_names(source: str, package: str) -> tuple[frozenset[str], frozenset[str]]:
    """The dotted names ``source`` (a module of ``package``) imports anywhere: all of them, and
    those outside ``if TYPE_CHECKING:`` blocks."""
    tree = ast.parse(source)
    typing_only = {id(n) for block in ast.walk(tree) if isinstance(block, ast.If)
                   and "TYPE_CHECKING" in ast.unparse(block.test) for stmt in block.body for n in ast.walk(stmt)}
    every, run_time = set(), set()
    for node in ast.walk(tree):
        names = set()
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from .x import y
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([node.module] if node.module else []))
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) \
                == "import_module" and node.args and isinstance(node.args[0], ast.Constant):
            names.add(str(node.args[0].value))
        every |= names
        if id(node) not in typing_only:
            run_time |= names
    return frozenset(every), frozenset(run_time)


def subpackage(module: str) -> str:
    """``simspec.sim.replay`` -> ``sim``; a top-level module is its own: ``simspec.cli`` -> ``cli``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "simspec"


def package_edges(root: Path = ROOT) -> dict[tuple[str, str], list[str]]:
    """(from, to) subpackage edges, each with the module imports that make it."""
    edges: dict[tuple[str, str], list[str]] = {}
    for module, targets in imports(root).items():
        for target in targets:
            if subpackage(module) != subpackage(target):
                edges.setdefault((subpackage(module), subpackage(target)), []).append(f"{module} -> {target}")
    return edges


def layering_violations(root: Path = ROOT) -> list[str]:
    edges = package_edges(root)
    found = [f"{a} must not import {b}: {', '.join(sorted(why))}"
             for (a, b), why in sorted(edges.items()) if b in NEVER.get(a, ()) or
             (a in NUMPY_ONLY_PACKAGES and b in NEVER["sim"])]
    graph: dict[str, set[str]] = {}
    for a, b in edges:
        graph.setdefault(a, set()).add(b)
        graph.setdefault(b, set())
    for component in cycles(graph):
        why = sorted(m for (a, b), ms in edges.items() if a in component and b in component for m in ms)
        found.append(f"package cycle {' <-> '.join(sorted(component))}: {', '.join(why)}")
    # ... and no cycle between the modules of one package either (an import inside a function
    # counts: the cycle is still there, only deferred; one for annotations only does not run).
    modules_graph = imports(root, run_time=True)
    for package in sorted({m.rpartition(".")[0] for m in modules_graph}):
        inside = {m: {t for t in ts if t.rpartition(".")[0] == package} for m, ts in modules_graph.items()
                  if m.rpartition(".")[0] == package}
        found += [f"module cycle {' <-> '.join(sorted(c))}" for c in cycles(inside)]
    return found


def cycles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components of more than one node (Tarjan)."""
    graph = {v: set(ws) & set(graph) for v, ws in graph.items()}
    index, low, stack, on_stack, components = {}, {}, [], set(), []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                components.append(component)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return components


def loaded_after_import(names: list[str], root: Path = ROOT, path: tuple[Path, ...] = ()) -> set[str]:
    """In a fresh interpreter: import ``names``; which heavy packages and simspec modules are loaded."""
    code = ("import importlib, json, sys\n"
            f"for name in {names!r}:\n"
            "    importlib.import_module(name)\n"
            "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in "
            f"{list(HEAVY)!r} and '.' not in m or m.startswith('simspec.'))))")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(str(p) for p in [root, *path])}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=root,
                            timeout=300)
    assert result.returncode == 0, result.stderr
    return set(json.loads(result.stdout.strip().splitlines()[-1]))


def numpy_only_modules(root: Path = ROOT) -> list[str]:
    return [m for m in modules(root) if subpackage(m) in NUMPY_ONLY_PACKAGES]


# --- the tests ----------------------------------------------------------------------------------

def test_simulator_and_policies_import_neither_torch_nor_transformers():
    chosen = numpy_only_modules()
    assert {"simspec.sim.replay", "simspec.sim.oracle", "simspec.sim.costmodel", "simspec.sim.traces",
            "simspec.sim.envs", "simspec.sim.evaluate", "simspec.policies.baselines"} <= set(chosen)
    loaded = loaded_after_import(chosen)
    assert not loaded & set(HEAVY), f"importing simspec.sim / simspec.policies loads {sorted(loaded & set(HEAVY))}"


def test_simulator_tests_are_numpy_only_too():
    loaded = loaded_after_import(list(NUMPY_ONLY_TESTS), path=(ROOT / "tests",))
    torch_side = {"simspec.engine", "simspec.measure", "simspec.distill", "simspec.train"}
    numpy_engine = {"simspec.engine", "simspec.engine.tree"}  # the draft tree is numpy (test_sampled_replay's)
    wrong = sorted(m for m in loaded - numpy_engine if m in HEAVY or ".".join(m.split(".")[:2]) in torch_side)
    assert not wrong, f"the simulator's test modules import {wrong}"


def test_subpackages_import_one_way_and_without_cycles():
    problems = layering_violations()
    assert not problems, "\n".join(problems)


def test_importing_simspec_changes_no_environment_variable():
    """Every module, in one fresh interpreter; the third-party libraries are imported first, so
    that only simspec's own side effects are seen."""
    names = list(modules())
    code = ("import importlib, json, os\n"
            "for lib in ('numpy', 'torch', 'transformers', 'stable_baselines3', 'gymnasium', 'matplotlib', "
            "'typer', 'rich', 'safetensors', 'scipy', 'sklearn'):\n"
            "    try:\n        importlib.import_module(lib)\n    except ImportError:\n        pass\n"
            "before = dict(os.environ)\n"
            f"for name in {names!r}:\n"
            "    importlib.import_module(name)\n"
            "after = dict(os.environ)\n"
            "print(json.dumps({k: [before.get(k), after.get(k)] for k in set(before) | set(after) "
            "if before.get(k) != after.get(k)}))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert result.returncode == 0, result.stderr
    changed = json.loads(result.stdout.strip().splitlines()[-1])
    assert not changed, f"importing simspec changed os.environ: {changed}"


def test_the_layering_checks_catch_a_torch_import_in_replay(tmp_path):
    """The checks above can fail: a copy of the package whose replay.py imports torch, and whose
    policies import the simulator, is caught by both the import and the graph checks."""
    shutil.copytree(ROOT / "simspec", tmp_path / "simspec", ignore=shutil.ignore_patterns("__pycache__"))
    replay = tmp_path / "simspec" / "sim" / "replay.py"
    replay.write_text(replay.read_text().replace("import numpy as np\n", "import numpy as np\nimport torch\n", 1))
    loaded = loaded_after_import(["simspec.sim.replay"], root=tmp_path)
    assert "torch" in loaded
    baselines = tmp_path / "simspec" / "policies" / "baselines.py"
    baselines.write_text(baselines.read_text() + "\n\ndef _late():\n    from simspec.sim.replay import replay\n")
    problems = layering_violations(tmp_path)
    assert any(p.startswith("policies must not import sim: simspec.policies.baselines -> simspec.sim.replay")
               for p in problems), problems
    assert any(p.startswith("package cycle policies <-> sim") for p in problems), problems
    # A cycle between two modules of one package, through an import inside a function, too.
    cost = tmp_path / "simspec" / "sim" / "costmodel.py"
    cost.write_text(cost.read_text() + "\n\ndef _late():\n    from simspec.sim.replay import replay\n")
    assert any(p.startswith("module cycle") and "simspec.sim.costmodel" in p for p in layering_violations(tmp_path))


FUNCTION_LINES = 80  # a function longer than this is several steps: name them


def long_functions(package: Path) -> list[str]:
    """Functions (and methods) of ``package`` longer than the house's bound, docstring included."""
    found = []
    for path in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > FUNCTION_LINES:
                    found.append(f"{path.relative_to(package.parent)}:{node.lineno} {node.name}: {lines} lines")
    return found


def test_no_function_outgrows_its_bound(tmp_path):
    assert not long_functions(ROOT / "simspec")
    # ... and the check can fail: a function one line past the bound is named.
    (tmp_path / "simspec").mkdir()
    body = "".join(f"    x{i} = {i}\n" for i in range(FUNCTION_LINES))
    (tmp_path / "simspec" / "big.py").write_text(f"def steps():\n{body}")
    assert long_functions(tmp_path / "simspec") == [f"simspec/big.py:1 steps: {FUNCTION_LINES + 1} lines"]


def test_the_numpy_only_watch_sees_a_module_loaded_before_it():
    """conftest.py's check around each simulator test: it must see an import of a package that a
    collected module loaded already (in a worker, torch is), by statement and by importlib."""
    import importlib

    from helpers import heavy_imports

    assert "json" in sys.modules
    with heavy_imports(("json", "email")) as seen:
        import json as again  # noqa: F401
        importlib.import_module("email.message")
        import numpy  # noqa: F401  (not watched)
    assert seen == {"json", "email"}
    with heavy_imports(("json",)) as seen:
        import numpy  # noqa: F401,F811
    assert not seen
    # a simspec module loaded before, which imports no watched package itself, but whose simspec
    # imports do (here json): imported again inside, it counts for what it brought
    import simspec.sim.traces

    assert not any(getattr(v, "__name__", "") == "json" for v in vars(simspec.sim.traces).values())
    with heavy_imports(("json",)) as seen:
        from simspec.sim import traces  # noqa: F401
    assert seen == {"json (through simspec.sim.traces)"}
