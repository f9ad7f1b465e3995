"""The Examples sections of the public API's docstrings run, and show what they claim."""

import ast
import doctest
import importlib
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[2] / "hcct_lite"

# Every module whose docstrings carry an example.
MODULES = [
    "hcct_lite.partition.greedy",
    "hcct_lite.partition.exact",
    "hcct_lite.partition.utility",
    "hcct_lite.partition.layer_selection",
    "hcct_lite.partition.merge_steps",
    "hcct_lite.partition.updates",
    "hcct_lite.partition.synthetic",
    "hcct_lite.training.config",
    "hcct_lite.training.models",
    "hcct_lite.schemes.registry",
    "hcct_lite.runs.runner",
    "hcct_lite.theory",
    "hcct_lite.lessons.decisions",
    "hcct_lite.lessons.assessment",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name):
    # import_module, not attribute access: hcct_lite.partition.merge_steps is also a function
    module = importlib.import_module(name)
    flags = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
    result = doctest.testmod(module, optionflags=flags, report=True, verbose=False)
    assert result.attempted > 0, f"{name} has no docstring example"
    assert result.failed == 0, f"{result.failed} docstring example(s) of {name} failed"


def _has_example(path: Path) -> bool:
    tree = ast.parse(path.read_text())
    nodes = [tree] + [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.ClassDef))]
    return any(">>>" in (ast.get_docstring(n) or "") for n in nodes)


def test_every_module_with_an_example_is_run():
    found = {
        ".".join(p.relative_to(PKG.parent).with_suffix("").parts)
        for p in PKG.rglob("*.py")
        if _has_example(p)
    }
    assert found == set(MODULES)
