"""The extension recipe as CONTRIBUTING writes it: a new scheme and a new task are each one
registration; both run (in-process, in a grid, on the command line), and the paper's grids,
the report and the compute identity of everything else stay as they were."""

import os

import pytest
import torch

from hcct_lite.reproduction.paper_grids import GRIDS, grid_jobs
from hcct_lite.runs.canary import CANARIES
from hcct_lite.schemes import GroupScheme
from hcct_lite.schemes.registry import (
    SCHEME_CLASSES,
    register_scheme,
    scheme_names,
    unregister_scheme,
)
from hcct_lite.training.config import SCHEMES, make_config
from hcct_lite.training.engine import run_experiment
from hcct_lite.training.models import MODEL_INPUT, register_model
from hcct_lite.training.provenance import compute_version
from hcct_lite.training.splits import even_split, make_clients
from hcct_lite.training.tasks import TASKS, register_task, unregister_task

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class EveryOther(GroupScheme):
    """A toy scheme: even clients average together, odd ones together."""

    name = "every-other"

    def groups(self, t, server):
        active = sorted(server.active)
        return [g for g in (active[0::2], active[1::2]) if g]


def _plain_digits(cfg):
    """A toy task: scikit-learn's digits, evenly split, no rotation."""
    import numpy as np

    from hcct_lite.training.data import load_dataset

    rng = np.random.default_rng([cfg.seed, 7])
    ds = load_dataset(cfg.dataset)
    parts = even_split(len(ds), cfg.n_clients, cfg.samples, rng)
    return make_clients(ds, parts, cfg.train_ratio, rng, *MODEL_INPUT[cfg.model])


TOY_DEFAULTS = dict(TASKS["rotated-digits"], n_clients=4, samples=80, epochs=2)


def _versions():
    jobs = grid_jobs(list(GRIDS))
    return jobs, [
        compute_version(make_config(j.task, j.scheme, j.seed, **j.overrides)) for j in jobs
    ]


def _everything_paper():
    """What a registration must not change: the grids, the report, every compute version."""
    from hcct_lite.reproduction.report import render_report

    return (*_versions(), render_report(os.path.join(ROOT, "results")), SCHEMES, dict(CANARIES))


@pytest.fixture(scope="module")
def paper():
    return _everything_paper()  # before any registration


@pytest.fixture
def toy(paper):
    register_scheme(EveryOther)
    register_task("plain-digits", TOY_DEFAULTS, _plain_digits)
    try:
        yield paper
    finally:
        unregister_scheme("every-other")
        unregister_task("plain-digits")


def test_a_registered_scheme_and_task_run_and_change_nothing_of_the_paper(toy, tmp_path):
    cfg = make_config("plain-digits", "every-other", 0)
    result = run_experiment(cfg, progress=False)
    assert result["status"] == {"state": "complete"} and len(result["history"]) == 2
    assert result["history"][-1]["groups"] == [[0, 2], [1, 3]]
    assert result["provenance"]["compute_version"] == {
        "engine": 1,
        "task plain-digits": 1,
        "scheme every-other": 1,
    }
    assert "every-other" in scheme_names() and "every-other" not in SCHEMES
    # the paper's grids, report, compute versions and canaries are what they were
    assert _everything_paper() == toy
    # a grid of it resumes and is reused like any other
    from hcct_lite.runs.runner import run_grid

    kw = dict(progress=False, log=None)
    (first,) = run_grid("plain-digits", ["every-other"], [0], str(tmp_path), **kw)
    logged = []
    run_grid(
        "plain-digits",
        ["every-other"],
        [0],
        str(tmp_path),
        progress=False,
        log=logged.append,
        dry_run=True,
    )
    assert logged[0].startswith("reuse plain-digits__every-other__seed0.json: same settings")
    assert first["final"] == result["final"]


def test_the_command_line_runs_a_registered_scheme_and_task(toy, capsys):
    from hcct_lite.cli import main

    assert main(["run", "--task", "plain-digits", "--scheme", "every-other", "--quiet"]) == 0
    assert "final groups [[0, 2], [1, 3]]" in capsys.readouterr().out


def test_a_bumped_scheme_version_makes_only_its_results_stale(toy, monkeypatch):
    cfg = make_config("plain-digits", "every-other", 0)
    monkeypatch.setattr(EveryOther, "compute_version", 2)
    assert compute_version(cfg)["scheme every-other"] == 2
    assert _versions()[1] == toy[1]


class Nameless(GroupScheme):
    pass


class BadVersion(EveryOther):
    name = "bad-version"
    compute_version = 0


@pytest.mark.parametrize(
    "args, words",
    [
        ((int,), "a scheme must be a subclass of Scheme"),
        ((EveryOther(),), "a scheme must be a subclass of Scheme"),
        ((Nameless,), "Nameless needs a name of its own"),
        ((BadVersion,), "BadVersion.compute_version must be an int >= 1; got 0"),
        ((EveryOther, "not callable"), "build must be callable"),
        ((SCHEME_CLASSES["hcct"],), "a scheme named 'hcct' is registered already"),
    ],
)
def test_a_bad_scheme_registration_is_refused_and_named(args, words):
    with pytest.raises(ValueError, match=words):
        register_scheme(*args)
    assert "every-other" not in SCHEME_CLASSES and "bad-version" not in SCHEME_CLASSES


@pytest.mark.parametrize(
    "name, defaults, build, kw, words",
    [
        ("", TOY_DEFAULTS, _plain_digits, {}, "a task needs a name"),
        ("x", {}, _plain_digits, {}, "task 'x': its defaults must name model, n_clients, "),
        ("x", {"model": "small_digits", "alpha": {"hcct": 1}}, _plain_digits, {}, "n_clients"),
        ("x", [], _plain_digits, {}, "defaults must be a dict"),
        ("x", TOY_DEFAULTS, _plain_digits, {"classes": 1}, "classes must be an int >= 2"),
        ("x", TOY_DEFAULTS, _plain_digits, {"classes": 2.0}, "classes must be an int >= 2"),
        ("x", dict(TOY_DEFAULTS, alpha=1.0), _plain_digits, {}, "defaults need 'alpha'"),
        ("x", TOY_DEFAULTS, None, {}, "build must be callable"),
        ("x", TOY_DEFAULTS, _plain_digits, {"fallback": 3}, "fallback must be callable"),
        ("x", TOY_DEFAULTS, _plain_digits, {"version": 1.5}, "version must be an int >= 1"),
        ("x", TOY_DEFAULTS, _plain_digits, {"version": True}, "version must be an int >= 1"),
        ("digit", TOY_DEFAULTS, _plain_digits, {}, "a task named 'digit' is registered already"),
    ],
)
def test_a_bad_task_registration_is_refused_and_named(name, defaults, build, kw, words):
    with pytest.raises(ValueError, match=words):
        register_task(name, defaults, build, **kw)
    assert "x" not in TASKS


def test_the_papers_own_cannot_be_unregistered_and_a_bad_default_is_named():
    with pytest.raises(ValueError, match="'hcct' is one of the paper's schemes"):
        unregister_scheme("hcct")
    with pytest.raises(ValueError, match="'digit' is one of the paper's tasks"):
        unregister_task("digit")
    register_task("typo-task", dict(TOY_DEFAULTS, n_client=4), _plain_digits)
    try:
        with pytest.raises(ValueError, match=r"unknown settings \['n_client'\]"):
            make_config("typo-task", "hcct")
    finally:
        unregister_task("typo-task")


def test_a_network_is_registered_with_its_input_or_refused():
    for args, words in (
        (("", torch.nn.Linear, 8, 1), "a network needs a name"),
        (("digit_cnn", torch.nn.Linear, 8, 1), "registered already"),
        (("x", None, 8, 1), "build must be callable"),
        (("x", torch.nn.Linear, 0, 1), "side must be an int >= 1"),
        (("x", torch.nn.Linear, 8, 2.0), "channels must be an int >= 1"),
        (("x", torch.nn.Linear, 8), "give side and channels, or input_shape"),
        (("x", torch.nn.Linear, 8, 1, False, (30,)), "give side and channels, or input_shape"),
        (("x", torch.nn.Linear, None, None, False, [30]), "input_shape must be a tuple"),
        (("x", torch.nn.Linear, None, None, False, (30, 0)), "input_shape must be a tuple"),
        (("x", torch.nn.Linear, None, None, False, ()), "input_shape must be a tuple"),
    ):
        with pytest.raises(ValueError, match=words):
            register_model(*args)
    assert "x" not in MODEL_INPUT


def test_a_network_that_ignores_num_classes_is_named_before_training(toy):
    from hcct_lite.training.models import MODEL_SHAPES, MODELS

    # the toy task has 10 classes; this network gives 2 outputs whatever it is asked for
    register_model(
        "two-outputs",
        lambda num_classes: torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(64, 2)),
        8,
        1,
    )
    try:
        cfg = make_config("plain-digits", "global", 0, model="two-outputs", epochs=1)
        with pytest.raises(
            ValueError, match=r"model 'two-outputs' gives outputs of shape \(2,\) .*10 classes"
        ):
            run_experiment(cfg, progress=False)
    finally:
        for table in (MODELS, MODEL_SHAPES, MODEL_INPUT):
            table.pop("two-outputs", None)


def test_an_unknown_model_is_named_with_its_task(toy):
    cfg = make_config("plain-digits", "global", 0, model="no-such-net", epochs=1)
    with pytest.raises(ValueError, match=r"task 'plain-digits': unknown model 'no-such-net'"):
        run_experiment(cfg, progress=False)
