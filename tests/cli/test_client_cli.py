"""Local training (updates with and without batch-norm buffers) and the command line."""

import json

import pytest
import torch
from torch import nn

from hcct_lite.cli import main
from hcct_lite.partition.updates import cosine_matrix
from hcct_lite.training.local import SGDTrainer
from hcct_lite.training.splits import ClientData


def bn_model():
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Flatten(), nn.Linear(8, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 3)
    )


def client(seed, shift):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(40, 8, generator=g) + shift
    y = (x[:, 0] > shift[0]).long() + (x[:, 1] > shift[1]).long()
    return ClientData(x, y, x[:4], y[:4])


@pytest.mark.parametrize("with_buffers", [False, True])
def test_update_is_start_minus_end_over_lr(with_buffers):
    model = bn_model()
    trainer = SGDTrainer(model, 2, 16, include_buffers=with_buffers, seed=0)
    start = {k: v.clone() for k, v in model.state_dict().items()}
    res = trainer.train({0: start}, {0: client(0, torch.zeros(8))}, lr=0.05, epoch=0)[0]
    expect = {"2.running_mean", "2.num_batches_tracked"} if with_buffers else set()
    assert expect <= set(res.update) and ("2.running_var" in res.update) == with_buffers
    for k in ("1.weight", "4.bias"):
        torch.testing.assert_close(res.update[k], (start[k] - res.state[k]) / 0.05)
    if with_buffers:
        assert res.update["2.num_batches_tracked"].item() == pytest.approx(-6 / 0.05)


def test_batch_norm_buffers_push_cosines_towards_one():
    shifts = [torch.zeros(8), torch.zeros(8), 3 * torch.ones(8), 3 * torch.ones(8)]
    cos = {}
    for with_buffers in (False, True):
        model = bn_model()
        start = {k: v.clone() for k, v in model.state_dict().items()}
        trainer = SGDTrainer(model, 1, 16, include_buffers=with_buffers, seed=0)
        res = trainer.train(
            {i: start for i in range(4)}, {i: client(i, s) for i, s in enumerate(shifts)}, 0.05, 0
        )
        cos[with_buffers] = cosine_matrix([res[i].update for i in range(4)])
    off = ~torch.eye(4, dtype=torch.bool).numpy()
    # the step counter (and running statistics), divided by lr, dominate every update
    assert (cos[True][off] > 0.85).all()
    assert (cos[True][off] > cos[False][off] + 0.1).all()


def test_cli_run_writes_json(tmp_path, capsys):
    out = tmp_path / "r.json"
    code = main(
        [
            "run",
            "--task",
            "rotated-digits",
            "--scheme",
            "hcct",
            "--seed",
            "1",
            "--epochs",
            "2",
            "--json",
            str(out),
            "--quiet",
        ]
    )
    assert code == 0
    r = json.loads(out.read_text())
    assert r["seed"] == 1 and r["config"]["epochs"] == 2 and len(r["history"]) == 2
    assert "mean test error" in capsys.readouterr().out


def test_cli_compare_prints_both_tables(tmp_path, capsys):
    code = main(
        [
            "compare",
            "--task",
            "rotated-digits",
            "--schemes",
            "global",
            "independent",
            "--seeds",
            "0",
            "1",
            "--epochs",
            "2",
            "--out",
            str(tmp_path),
            "--quiet",
        ]
    )
    assert code == 0
    text = capsys.readouterr().out
    assert "Table IV layout" in text and "Table V layout" in text and "independent" in text
    for name in ("tables.md", "tables_schemes.csv", "tables_per_client_rotated-digits.csv"):
        assert (tmp_path / name).exists()


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (["--task", "nope", "--scheme", "hcct"], "unknown task 'nope'"),
        (["--task", "rotated-digits", "--scheme", "x"], "unknown scheme 'x'"),
        (["--task", "rotated-digits", "--scheme", "hcct", "--alpha", "-1"], "alpha must be >= 0"),
        (
            ["--task", "rotated-digits", "--scheme", "hcct", "--epochs", "0"],
            "epochs must be in [1, 100000]",
        ),  # noqa: E501
        (["--task", "rotated-digits", "--scheme", "hcct", "--samples", "1"], "too few to split"),
        (
            [
                "--task",
                "digit",
                "--scheme",
                "hcct",
                "--domains",
                "svhn",
                "--no-download",
                "--data-root",
                "/nonexistent",
            ],
            "data set 'svhn' not found",
        ),
    ],
)
def test_cli_bad_settings_give_one_line_and_nonzero_exit(args, match, capsys, monkeypatch):
    monkeypatch.setenv("HCCT_DATA_DIR", "/nonexistent")
    assert main(["run", *args, "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("hcct-lite: error:") and match in err and "\n" not in err
