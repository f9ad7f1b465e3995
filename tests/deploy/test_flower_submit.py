"""``hcct-lite flower-run``: the exit status is the ServerApp's outcome, not the submission's."""

import json
from types import SimpleNamespace

import pytest

from hcct_lite.cli import main
from hcct_lite.deploy.submit import submit_and_wait


def fake_flwr(statuses, submitted=True):
    """Stand-ins for the flwr command (``run`` answers a run id) and for the SuperLink's
    status reader (each status in turn); ``calls`` records what was asked, in order."""
    calls = []
    left = list(statuses)

    def runner(args, **_):
        calls.append(args[1])
        body = {"success": submitted, "run-id": "42" if submitted else None}
        if not submitted:
            body["error-message"] = "could not connect to the SuperLink"
        return SimpleNamespace(returncode=0 if submitted else 1, stdout=json.dumps(body), stderr="")

    def status_reader(federation):
        def status_of(run_id):
            calls.append(f"status {federation} {run_id}")
            status = left.pop(0) if len(left) > 1 else left[0]
            if status == "unreachable":
                raise ConnectionError("connection refused")
            return status

        return status_of, lambda: calls.append("close")

    return runner, status_reader, calls


class Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t

    def sleep(self, s):
        self.t += s


@pytest.mark.parametrize(
    "statuses, code, words",
    [
        (["pending", "running", "finished:completed"], 0, "finished:completed"),
        (["running", "finished:failed"], 1, "finished:failed"),
        (["finished:stopped"], 1, "finished:stopped"),
        (["running"], 1, "still running after 10 s"),
    ],
)
def test_the_exit_status_follows_the_runs_outcome(statuses, code, words):
    runner, status_reader, calls = fake_flwr(statuses)
    clock = Clock()
    got, message = submit_and_wait(
        "app",
        "fed",
        "epochs=1",
        timeout=10,
        poll=2,
        runner=runner,
        clock=clock,
        sleep=clock.sleep,
        status_reader=status_reader,
    )
    assert got == code and words in message and "run 42" in message
    assert calls[0] == "run" and calls[-1] == "close"
    assert set(calls[1:-1]) == {"status fed 42"}
    # asked until finished, once per poll (10 s at 2 s: 5 asks when it never finishes)
    assert len(calls) - 2 == (5 if code == 1 and "still" in words else len(statuses))


def test_a_refused_submission_names_flwrs_reason():
    runner, status_reader, calls = fake_flwr(["running"], submitted=False)
    with pytest.raises(RuntimeError, match="flwr run failed: could not connect"):
        submit_and_wait("app", "fed", runner=runner, status_reader=status_reader)
    assert calls == ["run"]  # no connection to the SuperLink is opened for a refused run


def test_a_refusal_over_several_lines_is_kept_whole():
    body = {
        "success": False,
        "error-message": "Loading the ClientApp failed: module\n"
        "'hcct_flower_app' has no attribute 'client_app'. Check the\nattribute.",
    }

    def runner(args, **_):
        return SimpleNamespace(returncode=1, stdout=json.dumps(body), stderr="")

    with pytest.raises(RuntimeError) as err:
        submit_and_wait("app", "fed", runner=runner, status_reader=None)
    assert "has no attribute 'client_app'. Check the attribute." in str(err.value)


def test_a_failed_run_says_what_failing_can_mean():
    runner, status_reader, _ = fake_flwr(["finished:failed"])
    got, message = submit_and_wait("app", "fed", runner=runner, status_reader=status_reader)
    assert got == 1 and "the experiment stopped early: no silo answered acceptably" in message


def test_a_superlink_that_stops_answering_is_a_sentence_and_the_connection_is_closed():
    runner, status_reader, calls = fake_flwr(["unreachable"])
    clock = Clock()
    with pytest.raises(RuntimeError, match="run 42's status failed 5 times in a row: conn"):
        submit_and_wait(
            "app", "fed", runner=runner, clock=clock, sleep=clock.sleep, status_reader=status_reader
        )
    assert calls.count("status fed 42") == 5 and calls[-1] == "close"


def test_a_lost_answer_or_two_do_not_end_the_wait():
    runner, status_reader, calls = fake_flwr(
        ["running", "unreachable", "unreachable", "running", "finished:completed"]
    )
    clock = Clock()
    got, message = submit_and_wait(
        "app", "fed", runner=runner, clock=clock, sleep=clock.sleep, status_reader=status_reader
    )
    assert (got, message) == (0, "run 42: finished:completed")
    assert calls.count("status fed 42") == 5


@pytest.mark.parametrize("value", ["0", "-5", "nan", "inf"])
def test_a_bad_timeout_is_one_line(value, capsys):
    assert main(["flower-run", "app", "fed", "--timeout", value]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--timeout" in err[0]
