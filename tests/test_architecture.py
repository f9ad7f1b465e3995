"""The package's shape: no import cycle, no module reaching into another's private names."""

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
