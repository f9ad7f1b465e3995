"""The package's shape: layers that import only downwards, no import cycle, no module
reaching into another's private names, rooms of a readable size, functions of one screen."""

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "hcct_lite"


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
LAYERS = {
    "partition": 0,
    "theory": 0,
    "schemes": 1,
    "training": 2,
    "runs": 3,
    "privacy": 3,
    "reproduction": 4,
    "flower": 4,
    "lessons": 5,
    "viz": 6,
    "cli": 7,
    "demo": 7,
    "": 8,  # hcct_lite/__init__.py: the public API over everything
}


def _room(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def test_every_room_has_a_floor():
    assert {_room(m) for m in MODULES} == set(LAYERS)


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
