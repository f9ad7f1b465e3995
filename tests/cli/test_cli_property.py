"""Property: any bad number on the command line exits 2 with one line naming the argument."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hcct_lite.cli import main

INT_OPTIONS = [
    "--epochs",
    "--clients",
    "--local-epochs",
    "--batch-size",
    "--cluster-models",
    "--soft-groups",
    "--maxfl-reference-epochs",
    "--fixed-groups",
    "--seed",
]
BAD = [(o, v) for o in INT_OPTIONS for v in ("abc", "1.5", "", "nan")]
BAD += [(o, v) for o in INT_OPTIONS if o != "--seed" for v in ("0", "-3")]
BAD += [(o, v) for o in ("--lr", "--alpha") for v in ("nan", "inf", "-1", "x")]
BAD += [("--lr", "0"), ("--lr-decay", "0"), ("--lr-decay", "1.5"), ("--lr-decay", "nan")]
BAD += [("--train-ratio", v) for v in ("0", "1", "nan", "-0.5")]
BAD += [("--seed", str(2**32)), ("--seed", str(2**70)), ("--seed", "-1")]
# counts far beyond what a task can use: one line at once, not an overflow or hours of memory
BAD += [(o, "99999999999999999999") for o in INT_OPTIONS]
BAD += [("--samples", "99999999999999999999"), ("--lr", "1e-30"), ("--lr", "1e20")]
BAD += [("--lr", "99999999999999999999"), ("--clip-factor", "0.5"), ("--trim-fraction", "0.5")]


def _name(option):
    return option.lstrip("-").replace("-", "_").replace("clients", "n_clients")


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(bad=st.sampled_from(BAD), negative=st.integers(max_value=-1), pick=st.booleans())
def test_bad_numbers_exit_2_with_one_line_naming_the_argument(bad, negative, pick, capsys):
    option, value = (INT_OPTIONS[negative % (len(INT_OPTIONS) - 1)], str(negative)) if pick else bad
    argv = ["run", "--task", "rotated-digits", "--scheme", "hcct", "--quiet", option, value]
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's own errors
        code = exc.code
    err = capsys.readouterr().err.strip()
    assert code == 2, (argv, err)
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert option in err or _name(option) in err, (option, err)


@pytest.mark.parametrize("option", ["--epochs", "--lr"])
def test_valid_numbers_still_run(option, capsys):
    value = {"--epochs": "1", "--lr": "0.05"}[option]
    argv = ["run", "--task", "rotated-digits", "--scheme", "hcct", "--quiet", "--epochs", "1"]
    assert main([*argv, option, value]) == 0
