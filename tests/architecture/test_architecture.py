"""The package's shape: layers that import only downwards, no import cycle, no module
reaching into another's private names, rooms of a readable size, functions of one screen,
Flower's private code in one module of one room, on the Flower range the tests pass on."""

import ast
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PKG = ROOT / "hcct_lite"


def _module_name(path: Path) -> str:
    rel = path.relative_to(PKG.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _imports(path: Path):
    """(imported module, [names]) for every ``from X import ...`` of hcct_lite in ``path``,
    lazy imports inside functions included."""
    me = _module_name(path)
    package = me if path.name == "__init__.py" else me.rsplit(".", 1)[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target == "hcct_lite" or target.startswith("hcct_lite."):
                yield target, [a.name for a in node.names]
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("hcct_lite."):
                    yield a.name, []


MODULES = {_module_name(p): p for p in PKG.rglob("*.py") if "app" not in p.relative_to(PKG).parts}


def _resolve(target, name):
    """The module a ``from target import name`` really depends on."""
    sub = f"{target}.{name}"
    return sub if sub in MODULES else target


def _graph():
    graph = {m: set() for m in MODULES}
    for m, path in MODULES.items():
        for target, names in _imports(path):
            for dep in {_resolve(target, n) for n in names} or {target}:
                if dep in MODULES and dep != m and not m.startswith(dep + "."):
                    graph[m].add(dep)
    return graph


def test_no_import_cycle():
    graph, state, stack, cycles = _graph(), {}, [], []

    def visit(m):
        state[m] = "open"
        stack.append(m)
        for d in sorted(graph[m]):
            if state.get(d) == "open":
                cycles.append(stack[stack.index(d) :] + [d])
            elif d not in state:
                visit(d)
        stack.pop()
        state[m] = "done"

    for m in sorted(graph):
        if m not in state:
            visit(m)
    # a package __init__ that re-exports its own modules is not a cycle
    real = [
        c for c in cycles if not any(a.startswith(b + ".") for a, b in zip(c, c[1:], strict=False))
    ]
    assert not real, "import cycles: " + "; ".join(" -> ".join(c) for c in real)


def test_no_private_name_is_imported_from_another_module():
    offenders = []
    for m, path in MODULES.items():
        for target, names in _imports(path):
            for n in names:
                if n.startswith("_") and _resolve(target, n) != m:
                    offenders.append(f"{m} imports {n} from {target}")
    assert not offenders, "\n".join(offenders)


def test_no_file_over_400_lines():
    long = {m: len(p.read_text().splitlines()) for m, p in MODULES.items()}
    assert not {m: n for m, n in long.items() if n > 400}


# Each room of the package and its floor: a module imports only from its own room or from
# rooms on lower floors, so data flows one way (from the algorithm up to the notebooks).
CORE = {
    "parts": 0,  # the optional parts' registry: what they add, found by entry point
    "partition": 0,
    "theory": 0,
    "schemes": 1,
    "training": 2,
    "runs": 3,
    "reproduction": 4,
    "lessons": 5,
    "viz": 6,
    "cli": 7,
    "demo": 7,
    "": 8,  # hcct_lite/__init__.py: the public API over the core
}
# The optional parts, above the whole core: each may use the core, the core none of them
EXTRAS = {
    "gpu": 9,  # batched clients, CUDA graphs, the GPU queue
    "ray": 10,  # grids on Ray (it sizes GPU shares by the GPU part's memory model)
    "deploy": 11,  # Flower apps, defences, privacy (flower-sim on Ray)
}
LAYERS = {**CORE, **EXTRAS}
# what the optional parts need beyond the core's dependencies
EXTRA_PACKAGES = ("flwr", "opacus", "ray")


def _room(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def test_every_room_has_a_floor():
    assert {_room(m) for m in MODULES} == set(LAYERS)


def _third_party(path: Path):
    """Every top-level package ``path`` imports (lazy imports inside functions included)."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and not node.level and node.module:
            yield node.module.split(".")[0]
        elif isinstance(node, ast.Import):
            yield from (a.name.split(".")[0] for a in node.names)


def test_the_core_imports_no_optional_part():
    """No core module imports an optional part of the package or what only a part needs.

    The parts reach the core through :mod:`hcct_lite.parts` (entry points), never the other
    way; a lazy import inside a function counts too.
    """
    core = {m: p for m, p in MODULES.items() if _room(m) in CORE}
    assert "hcct_lite.training.engine" in core and "hcct_lite.deploy" not in core
    up = sorted(f"{m} imports {d}" for m in core for d in _graph()[m] if _room(d) in EXTRAS)
    assert not up, "the core imports an optional part:\n" + "\n".join(up)
    needs = sorted(
        f"{m} imports {pkg}"
        for m, p in core.items()
        for pkg in _third_party(p)
        if pkg in EXTRA_PACKAGES
    )
    assert not needs, "the core imports what only an optional part needs:\n" + "\n".join(needs)


def test_every_optional_part_registers_through_an_entry_point():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    points = project["entry-points"]["hcct_lite.parts"]
    assert set(points) == set(EXTRAS)
    for name, target in points.items():
        assert target == f"hcct_lite.{name}:register"
    extras = project["optional-dependencies"]
    from hcct_lite.parts import EXTRAS as PART_EXTRAS

    assert set(PART_EXTRAS) == set(EXTRAS) and all(PART_EXTRAS[n] in extras for n in EXTRAS)


def test_imports_run_only_down_the_layers():
    up = [
        f"{m} imports {d}"
        for m, deps in _graph().items()
        for d in deps
        if _room(d) != _room(m) and LAYERS[_room(d)] >= LAYERS[_room(m)]
    ]
    assert not up, "imports that do not run down the layers:\n" + "\n".join(sorted(up))


def test_no_folder_over_12_modules_or_a_quarter_of_the_lines():
    lines = {p: len(p.read_text().splitlines()) for p in PKG.rglob("*.py")}
    total = sum(lines.values())
    folders = {}
    for p, n in lines.items():
        count, size = folders.get(p.parent, (0, 0))
        folders[p.parent] = (count + 1, size + n)
    big = {
        str(f.relative_to(PKG.parent)): (count, f"{size / total:.0%}")
        for f, (count, size) in folders.items()
        if count > 12 or size > total / 4
    }
    assert not big, f"folders over 12 modules or 25% of the package's lines: {big}"


def _body_lines(fn) -> int:
    body = fn.body
    if isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]  # the docstring does not count
    return body[-1].end_lineno - body[0].lineno + 1 if body else 0


def test_no_function_body_over_60_lines():
    long = [
        f"{_module_name(p)}.{fn.name}: {_body_lines(fn)} lines"
        for p in PKG.rglob("*.py")
        for fn in ast.walk(ast.parse(p.read_text()))
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and _body_lines(fn) > 60
    ]
    assert not long, "function bodies over 60 lines (docstring excluded): " + "; ".join(long)


# --- Flower: its public API everywhere, its private code in one module -----------------------

FLOWER_PUBLIC = {"flwr.app", "flwr.clientapp", "flwr.serverapp", "flwr.simulation"}
FLOWER_INTERNALS = PKG / "deploy" / "flower_internals.py"
# Flower's private message id (``reply_to_message_id`` is public), or any object's __dict__
PRIVATE_FIELDS = re.compile(r"(?<![A-Za-z0-9])_message_id|__dict__\[")


def _flower_imports(path: Path):
    """Every Flower module ``path`` imports (lazy imports inside functions included)."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names = [node.module]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        yield from (n for n in names if n == "flwr" or n.startswith("flwr."))


def test_flowers_private_code_is_used_in_one_module_only():
    """Outside ``deploy/flower_internals.py`` only Flower's public modules are imported, and
    no Flower object's private field is written."""
    private, pokes = [], []
    for path in sorted(PKG.rglob("*.py")):
        if path == FLOWER_INTERNALS:
            continue
        rel = path.relative_to(ROOT)
        private += [f"{rel}: {m}" for m in _flower_imports(path) if m not in FLOWER_PUBLIC]
        text = path.read_text()
        pokes += [f"{rel}: {w}" for w in PRIVATE_FIELDS.findall(text)]
    assert not private, "Flower's private modules outside deploy/flower_internals.py:\n" + (
        "\n".join(private)
    )
    assert not pokes, "Flower's private fields written outside it: " + "; ".join(pokes)


def test_the_flower_internals_module_is_where_the_private_code_is():
    # the rule above would pass on a module that moved elsewhere: this one must be it
    used = set(_flower_imports(FLOWER_INTERNALS)) - FLOWER_PUBLIC
    assert {"flwr.supercore.task_identity", "flwr.common.serde"} <= used
    assert "_message_id" in FLOWER_INTERNALS.read_text()


def _requirements(path: Path):
    """The requirement strings that name Flower in a pyproject.toml or an environment.yml."""
    if path.suffix == ".toml":
        project = tomllib.loads(path.read_text()).get("project", {})
        reqs = list(project.get("dependencies", []))
        for extra in project.get("optional-dependencies", {}).values():
            reqs += extra
    else:  # a conda environment: its pip list, one requirement a line
        reqs = [line.strip().removeprefix("- ").strip() for line in path.read_text().splitlines()]
    return [r for r in reqs if re.match(r"flwr\b(?!-)", r)]


def test_flower_is_pinned_to_the_tested_range_in_every_file_that_names_it():
    from hcct_lite.deploy.flower_internals import FLOWER_REQUIREMENT

    files = [ROOT / "pyproject.toml", ROOT / "environment.yml", *PKG.rglob("pyproject.toml")]
    named = {str(f.relative_to(ROOT)): _requirements(f) for f in files}
    for top in ("pyproject.toml", "environment.yml"):  # both install Flower, both pin it
        assert named[top], f"{top} names no Flower requirement"
    loose = {f: r for f, reqs in named.items() for r in reqs if r != FLOWER_REQUIREMENT}
    assert not loose, f"Flower requirements other than {FLOWER_REQUIREMENT}: {loose}"
    # the deployment guide tells a user the range, and how to try the next one
    assert FLOWER_REQUIREMENT in (ROOT / "docs" / "deploy.md").read_text()


def test_the_installed_flower_is_within_the_tested_range():
    from hcct_lite.deploy.flower_internals import version_problem

    assert version_problem() is None  # make flower-next runs the Flower tests on the next one


def test_the_formatter_formats_every_line():
    """No fmt-skip or fmt-off comment packs lines past ``ruff format``: a file that grows
    too big is split by concept instead."""
    marker = re.compile(r"#\s*fmt:\s*(skip|off)\b")
    files = [
        p for d in ("hcct_lite", "tests", "benchmarks", "tools") for p in (ROOT / d).rglob("*.py")
    ]
    packed = [
        f"{p.relative_to(ROOT)}:{n}"
        for p in files + [ROOT / "conftest.py"]
        for n, line in enumerate(p.read_text().splitlines(), 1)
        if marker.search(line)
    ]
    assert len(files) > 100 and not packed, "lines kept from the formatter: " + ", ".join(packed)
