"""The Examples sections of the public API's docstrings run, and show what they claim."""

import doctest
import importlib

import pytest

# Every module whose public docstrings carry an Examples section.
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
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name):
    module = importlib.import_module(name)
    flags = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
    result = doctest.testmod(module, optionflags=flags, report=True, verbose=False)
    assert result.attempted > 0, f"{name} has no docstring example"
    assert result.failed == 0, f"{result.failed} docstring example(s) of {name} failed"
