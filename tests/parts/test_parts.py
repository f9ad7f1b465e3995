"""The optional parts' registry: what a part may register, and a part that breaks."""

import copy
from types import SimpleNamespace

import pytest

from hcct_lite import parts


@pytest.fixture
def registry(monkeypatch):
    """A copy of the registry, loaded already, that the test may change freely."""
    parts.load_parts()
    monkeypatch.setattr(parts, "_REGISTRY", copy.deepcopy(parts._REGISTRY))
    return parts._REGISTRY


def test_the_packages_own_parts_register_what_the_core_asks_for():
    assert set(parts.load_parts()) >= {"deploy", "gpu", "ray"}
    assert set(parts.each("trainer")) == {"batched", "graphs"}
    assert parts.find("grid-options", "ray").__module__ == "hcct_lite.ray.options"
    assert parts.find("runner", "gpu-queue").__name__ == "QueueOptions"
    assert parts.find("defence", "deployment").__name__ == "Defence"
    assert parts.find("trainer", "no-such") is None


@pytest.mark.parametrize(
    "args, message",
    [
        (("colour", "x", "math:pi", "p"), "unknown kind 'colour'"),
        (("trainer", "x", "math.pi", "p"), "target must be 'module:attribute'"),
        (("trainer", "x", "a:b:c", "p"), "target must be 'module:attribute'"),
        (("trainer", "x", 42, "p"), "target must be 'module:attribute'"),
        (("trainer", "batched", "math:pi", "another"), "registered already, by the part 'gpu'"),
    ],
)
def test_a_bad_registration_is_refused_naming_what_is_wrong(registry, args, message):
    with pytest.raises(ValueError, match=message):
        parts.register(*args)


def test_a_part_may_register_again_what_it_registered(registry):
    parts.register("trainer", "batched", "math:pi", "gpu")  # the same part: a replacement
    assert parts.find("trainer", "batched") == pytest.approx(3.14159, abs=1e-5)


def test_a_broken_part_is_left_out_with_a_warning_and_the_others_load(monkeypatch):
    def good():
        parts.register("trainer", "good", "math:tau", "good")

    def half_then_broken():
        parts.register("trainer", "half", "math:e", "broken")
        raise ImportError("No module named 'missing_dependency'")

    def taker():  # takes a name another part has
        parts.register("trainer", "good", "math:e", "taker")

    points = [
        SimpleNamespace(name=n, value=f"{n}:register", load=lambda f=f: f)
        for n, f in (("a-broken", half_then_broken), ("b-good", good), ("c-taker", taker))
    ]
    monkeypatch.setattr(parts, "entry_points", lambda group: points)
    monkeypatch.setattr(parts, "_REGISTRY", {kind: {} for kind in parts.KINDS})
    monkeypatch.setattr(parts, "_LOADED", [])
    with pytest.warns(UserWarning) as caught:
        assert parts.load_parts() == ("b-good",)
    said = [str(w.message) for w in caught]
    assert "'a-broken'" in said[0] and "missing_dependency" in said[0]
    assert "'c-taker'" in said[1] and "registered already" in said[1]
    assert parts.find("trainer", "half") is None  # nothing half-registered stays
    assert parts.find("trainer", "good") == pytest.approx(6.28318, abs=1e-5)
    assert parts.load_parts() == ("b-good",)  # once: no second warning, same answer


def test_what_needs_a_missing_part_says_which_and_how_to_install_it():
    err = parts.part_missing("batched_clients", "gpu")
    assert isinstance(err, ValueError)
    assert "batched_clients needs the gpu part" in str(err) and "'.[gpu]'" in str(err)
    assert "'.[flower]'" in str(parts.part_missing("aggregator", "deploy"))
