"""``hcct-lite flower-run``: the exit status is the ServerApp's outcome, not the submission's."""

import json
from types import SimpleNamespace

import pytest

from hcct_lite.cli import main
from hcct_lite.flower.submit import submit_and_wait


def fake_flwr(statuses, submitted=True):
    """A stand-in for the flwr command: ``run`` answers a run id, ``ls`` each status in turn."""
    calls = []
    left = list(statuses)

    def runner(args, **_):
        calls.append(args[1])
        if args[1] == "run":
            body = {"success": submitted, "run-id": "42" if submitted else None}
            if not submitted:
                body["error-message"] = "could not connect to the SuperLink"
            return SimpleNamespace(
                returncode=0 if submitted else 1, stdout=json.dumps(body), stderr=""
            )
        status = left.pop(0) if len(left) > 1 else left[0]
        body = {"success": True, "runs": [{"run-id": "42", "status": status}]}
        return SimpleNamespace(returncode=0, stdout="Loading...\n" + json.dumps(body), stderr="")

    return runner, calls


class Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t

    def sleep(self, s):
        self.t += s


@pytest.mark.parametrize(
    "statuses, code, words",
    [(["pending", "running", "finished:completed"], 0, "finished:completed"),
     (["running", "finished:failed"], 1, "finished:failed"),
     (["finished:stopped"], 1, "finished:stopped"),
     (["running"], 1, "still running after 10 s")],
)  # fmt: skip
def test_the_exit_status_follows_the_runs_outcome(statuses, code, words):
    runner, calls = fake_flwr(statuses)
    clock = Clock()
    got, message = submit_and_wait("app", "fed", "epochs=1", timeout=10, poll=2,
                                   runner=runner, clock=clock, sleep=clock.sleep)  # fmt: skip
    assert got == code and words in message and "run 42" in message
    assert calls[0] == "run" and set(calls[1:]) == {"ls"}


def test_a_refused_submission_names_flwrs_reason():
    runner, _ = fake_flwr(["running"], submitted=False)
    with pytest.raises(RuntimeError, match="flwr run failed: could not connect"):
        submit_and_wait("app", "fed", runner=runner)


@pytest.mark.parametrize("value", ["0", "-5", "nan", "inf"])
def test_a_bad_timeout_is_one_line(value, capsys):
    assert main(["flower-run", "app", "fed", "--timeout", value]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--timeout" in err[0]
