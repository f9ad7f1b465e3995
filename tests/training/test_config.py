"""A run's config cannot be wrong: every way of building one validates it, and none changes it."""

import dataclasses
import math
from pathlib import Path

import numpy as np
import pytest

from hcct_lite.deploy.defences.robust import Aggregator
from hcct_lite.training.config import (
    RunConfig,
    SettingTypeError,
    make_config,
    part_settings,
)
from hcct_lite.training.engine import run_experiment

BASE = {"task": "rotated-digits", "scheme": "hcct"}
# the optional parts' settings (the deployment's, the GPU's): a RunConfig's options
PARTS = set(part_settings())


def _config(**settings) -> RunConfig:
    """A RunConfig built directly, the optional parts' settings as its options."""
    own = {k: v for k, v in settings.items() if k not in PARTS}
    return RunConfig(**{**BASE, **own}, options={k: v for k, v in settings.items() if k in PARTS})


NUMBERS = [
    "seed",
    "n_clients",
    "samples",
    "train_ratio",
    "batch_size",
    "lr",
    "lr_decay",
    "local_epochs",
    "epochs",
    "alpha",
    "cluster_models",
    "soft_groups",
    "maxfl_reference_epochs",
    "norm_limit",
    "count_bound",
    "clip_factor",
    "trim_fraction",
    "new_clients",
    "join_every",
]
# values out of range for each number (a bad type is tried for every setting below)
OUT_OF_RANGE = {
    "seed": [-1, 2**32],
    "n_clients": [0, -3, 10_001],
    "samples": [-1],
    "train_ratio": [0, 1, -0.5, 1.5],
    "batch_size": [0, -64],
    "lr": [0, -5.0, 1e-12, 1e3],
    "lr_decay": [0, -0.5, 1.01],
    "local_epochs": [0, -1],
    "epochs": [0, -30, 100_001],
    "alpha": [-1.0, -1e-9],
    "cluster_models": [0, 9],
    "soft_groups": [0, 5],
    "maxfl_reference_epochs": [0],
    "norm_limit": [-1.0, 1.5],
    "count_bound": [-1.0, 0.5],
    "clip_factor": [0, 0.99, -4.0],
    "trim_fraction": [-0.1, 0.5, 1.0],
    "new_clients": [-1, 9],
    "join_every": [0, -10],
    "initial_clients": [0, 9],
    "fixed_groups": [0, 9],
}
CASES = [(k, v) for k, vs in OUT_OF_RANGE.items() for v in vs]
CASES += [(k, v) for k in NUMBERS for v in (math.nan, math.inf, -math.inf)]


@pytest.mark.parametrize(("name", "value"), CASES)
def test_a_value_out_of_range_is_refused_naming_the_setting(name, value):
    with pytest.raises(ValueError, match=name):
        _config(**{name: value})
    with pytest.raises(ValueError, match=name):  # make_config keeps the same rule
        make_config(
            BASE["task"], BASE["scheme"], **({"seed": value} if name == "seed" else {name: value})
        )


INTS = [
    "n_clients",
    "samples",
    "batch_size",
    "local_epochs",
    "epochs",
    "cluster_models",
    "soft_groups",
    "maxfl_reference_epochs",
    "new_clients",
    "join_every",
]
FLOATS = [n for n in NUMBERS if n not in INTS and n != "seed"]
BOOLS = [
    "update_includes_buffers",
    "authors_round0",
    "record_cosines",
    "download",
    "cuda_graphs",
    "batched_clients",
]
STRS = ["model", "dataset", "maxfl_threshold", "aggregator", "device", "gpu_precision"]
WRONG = (
    [(k, v) for k in INTS + ["seed"] for v in ("8", 8.0, True, None, [8])]
    + [(k, v) for k in FLOATS for v in ("0.1", True, False, None, [0.1], 1j)]
    + [(k, v) for k in BOOLS for v in (1, 0, "True", None)]
    + [(k, v) for k in STRS for v in (5, None, b"cpu")]
    + [
        ("initial_clients", "4"),
        ("fixed_groups", 2.0),
        ("data_root", 5),
        ("domains", "digits"),
        ("domains", [1, 2]),
        ("partition", "0,1|2"),
        ("partition", [[0, 1.0]]),
        ("partition", [[True]]),
        ("task", None),
        ("scheme", 3),
    ]
)


@pytest.mark.parametrize(("name", "value"), WRONG)
def test_a_value_of_the_wrong_type_is_refused_naming_the_setting(name, value):
    if name in PARTS:  # an optional part's own rule: a ValueError naming the setting
        with pytest.raises(ValueError, match=f"{name} must be"):
            _config(**{name: value})
        return
    with pytest.raises(SettingTypeError, match=name) as err:
        RunConfig(**{**BASE, name: value})
    # a TypeError, and a ValueError as every bad setting (the command line reports it in a line)
    assert isinstance(err.value, TypeError) and isinstance(err.value, ValueError)


def test_make_config_keeps_its_messages():
    with pytest.raises(ValueError, match=r"lr must be a finite number > 0; got -5.0"):
        make_config("rotated-digits", "hcct", 0, lr=-5.0)
    with pytest.raises(ValueError, match=r"unknown task 'nope'"):
        RunConfig(task="nope", scheme="hcct")
    with pytest.raises(ValueError, match=r"unknown scheme 'fedprox'"):
        make_config("rotated-digits", "fedprox")
    with pytest.raises(ValueError, match=r"unknown settings \['lrr'\]"):
        make_config("rotated-digits", "hcct", 0, lrr=0.1)


def test_run_experiment_never_sees_an_invalid_config():
    # the config is refused where it is built, before any data is loaded or any step taken
    with pytest.raises(ValueError, match="lr must be a finite number > 0; got -5.0"):
        run_experiment(RunConfig(task="rotated-digits", scheme="hcct", lr=-5.0), progress=False)


def test_a_config_cannot_be_changed_only_replaced_and_checked_again():
    cfg = make_config("rotated-digits", "hcct", 0, epochs=2)
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.lr = -5.0
    with pytest.raises(dataclasses.FrozenInstanceError):
        del cfg.epochs
    with pytest.raises(AttributeError):
        cfg.domains.append("mnist")  # a tuple
    assert cfg.lr == 0.1 and cfg.epochs == 2
    shorter = dataclasses.replace(cfg, epochs=5)
    assert (shorter.epochs, cfg.epochs) == (5, 2)
    with pytest.raises(ValueError, match="lr must be"):
        dataclasses.replace(cfg, lr=-5.0)
    assert hash(cfg) == hash(make_config("rotated-digits", "hcct", 0, epochs=2))


def test_sequences_and_numpy_numbers_are_stored_as_the_json_shows_them():
    cfg = RunConfig(
        task="rotated-digits",
        scheme="fixed",
        partition=[[1, 0], [2, 3], [4, 5, 6, 7]],
        domains=["digits"],
        epochs=np.int64(3),
        lr=np.float32(0.5),
        data_root=Path("/tmp"),
    )
    assert cfg.partition == ((1, 0), (2, 3), (4, 5, 6, 7)) and cfg.domains == ("digits",)
    assert type(cfg.epochs) is int and type(cfg.lr) is float and cfg.data_root == "/tmp"
    d = cfg.to_dict()
    assert d["partition"] == [[1, 0], [2, 3], [4, 5, 6, 7]] and d["domains"] == ["digits"]
    assert RunConfig.from_dict(d) == cfg  # a stored config builds the same one back
    assert make_config("rotated-digits", "hcct", 2.0).seed == 2  # as make_config always took


@pytest.mark.parametrize(
    ("kw", "name"),
    [
        ({"kind": "mode"}, "aggregator"),
        ({"kind": None}, "aggregator"),
        ({"kind": ["mean"]}, "aggregator"),
        *[
            ({"clip_factor": v}, "clip_factor")
            for v in (0, 0.5, -1, math.nan, math.inf, "4", None, True)
        ],
        *[
            ({"trim_fraction": v}, "trim_fraction")
            for v in (-0.1, 0.5, math.nan, "0.2", None, False)
        ],
        *[({"batch_size": v}, "batch_size") for v in (0, -1, 2.5, "64", None, True)],
        *[({"local_epochs": v}, "local_epochs") for v in (0, -2, 1.0, math.nan, None, False)],
    ],
)
def test_an_aggregator_checks_each_parameter(kw, name):
    with pytest.raises(ValueError, match=name):
        Aggregator(**{"kind": "median", **kw})


def test_an_aggregators_parameters_are_fixed():
    agg = Aggregator("trimmed-mean", clip_factor=2, trim_fraction=0.1, batch_size=np.int64(8))
    for name in ("kind", "clip_factor", "trim_fraction", "batch_size", "local_epochs"):
        with pytest.raises(AttributeError, match=name):
            setattr(agg, name, 1)
    assert (agg.kind, agg.clip_factor, agg.trim_fraction, agg.batch_size) == (
        "trimmed-mean",
        2,
        0.1,
        8,
    )


def test_the_parts_settings_are_options_a_stored_config_writes_flat():
    paper = make_config("rotated-digits", "global", 0)
    assert paper.options == () and paper.option("norm_limit") == 0.0  # the part's default
    # a part's setting at its default is no option: the same config as the paper's
    assert make_config("rotated-digits", "global", 0, norm_limit=0, aggregator="mean") == paper
    cfg = make_config("rotated-digits", "global", 0, norm_limit=np.float64(20), aggregator="median")
    assert cfg.options == (("aggregator", "median"), ("norm_limit", 20.0))
    assert type(cfg.option("norm_limit")) is float
    d = cfg.to_dict()  # every part's setting beside the paper's, as result files hold them
    assert PARTS <= set(d) and (d["aggregator"], d["clip_factor"]) == ("median", 4.0)
    assert RunConfig.from_dict(d) == cfg and RunConfig.from_dict(paper.to_dict()) == paper
    assert hash(cfg) == hash(RunConfig.from_dict(d))


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"norm_limt": 20.0}, "unknown setting 'norm_limt'"),
        ({"epochs": 3}, "'epochs' is a RunConfig field, not an option"),
        ("norm_limit=20", "options must be a dict"),
        (5, "options must be a dict"),
        ([("norm_limit",)], "options must be a dict"),
    ],
)
def test_options_that_no_part_adds_are_refused_naming_them(options, message):
    with pytest.raises(ValueError, match=message):
        RunConfig(**BASE, options=options)


def test_option_messages_name_the_mistake():
    with pytest.raises(
        ValueError, match=r"unknown settings \['norm_limt'\] .did you mean 'norm_limit'"
    ):
        make_config("rotated-digits", "hcct", norm_limt=20.0)
    with pytest.raises(ValueError, match="'epochs' is a RunConfig field, not an option"):
        RunConfig(**BASE, options={"epochs": 5})
    for name, value, kind in [
        ("norm_limit", "20", "a number"),
        ("aggregator", 3, "a str"),
        ("cuda_graphs", 1, "a bool"),
    ]:  # a part's setting of the wrong type is a SettingTypeError, as a field's is
        with pytest.raises(SettingTypeError, match=f"{name} must be {kind}"):
            make_config("rotated-digits", "hcct", **{name: value})
    # options given whole and one by one are merged; a whole that is no dict is named
    both = make_config("rotated-digits", "hcct", options={"norm_limit": 20.0}, aggregator="median")
    assert both.options == (("aggregator", "median"), ("norm_limit", 20.0))
    with pytest.raises(ValueError, match="options must be a dict"):
        make_config("rotated-digits", "hcct", options=5)
