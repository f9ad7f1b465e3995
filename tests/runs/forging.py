"""Result files forged as a careful forger would: shared by the tests of verify and reuse."""

from hcct_lite.runs.verify import federation
from hcct_lite.training.engine import summarize


def whole(r: dict) -> dict:
    """``r`` with every derived field recomputed, as a careful forger would leave it."""
    for h in r["history"]:
        answered = [e for e in h["client_test_error"] if e is not None]
        h["mean_test_error"] = sum(answered) / len(answered)
        h["n_groups"] = len(h["groups"])
    r["final"] = summarize(r["history"])
    return r


def lowered(r: dict, samples: float) -> dict:
    """``r`` with every client's error in every epoch lowered by ``samples`` test samples."""
    tests = federation(r)["test_sizes"]
    for h in r["history"]:
        h["client_test_error"] = [
            100.0 * max(round(e * n / 100.0) - samples, 0) / n
            for e, n in zip(h["client_test_error"], tests, strict=True)
        ]
    return whole(r)
