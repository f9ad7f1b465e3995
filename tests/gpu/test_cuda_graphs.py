"""CUDA-graph local steps: chosen only on a GPU, and computing what eager steps compute.

The tests marked ``gpu`` need a CUDA device (CI has none; they run on a lent GPU machine).
"""

import json

import pytest
import torch

from hcct_lite.gpu.graphs import GraphedSGDTrainer
from hcct_lite.runs.jobs import Job, job_path, with_settings
from hcct_lite.runs.runner import pending_jobs
from hcct_lite.runs.store import reuse_problem
from hcct_lite.training.config import make_config
from hcct_lite.training.engine import run_experiment
from hcct_lite.training.local import SGDTrainer
from hcct_lite.training.models import build_model
from hcct_lite.training.tasks import build_clients


def gpu(test):
    """Marked ``gpu`` (conftest.py: ``slow`` too, ``pytest -m gpu``), skipped without CUDA."""
    needs = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
    return pytest.mark.gpu(needs(test))


def test_cuda_graphs_on_the_cpu_is_refused_naming_the_setting():
    with pytest.raises(ValueError, match="cuda_graphs needs a GPU"):
        make_config("rotated-digits", "hcct", 0, cuda_graphs=True)
    with pytest.raises(ValueError, match="cuda_graphs must be a bool"):
        make_config("rotated-digits", "hcct", 0, cuda_graphs="yes", device="cuda")
    with pytest.raises(ValueError, match="cuda_graphs needs a CUDA device; got device 'cpu'"):
        GraphedSGDTrainer(build_model("small_digits"), 1, 16, device="cpu")


def test_with_settings_adds_to_every_job_and_leaves_none_out():
    jobs = [Job("g", "a", "rotated-digits", "hcct", 0, {"alpha": 2.0}), Job("g", "b", "x", "y", 1)]
    out = with_settings(jobs, norm_limit=0.0, cuda_graphs=None)
    assert [j.overrides for j in out] == [{"alpha": 2.0, "norm_limit": 0.0}, {"norm_limit": 0.0}]
    assert jobs[0].overrides == {"alpha": 2.0}  # the grid's own jobs unchanged
    assert with_settings(jobs, norm_limit=None) == jobs


def test_a_norm_limit_switch_reruns_results_of_another_limit(tmp_path):
    job = Job("g", "hcct-seed0", "rotated-digits", "hcct", 0, {"epochs": 1})
    cfg = make_config("rotated-digits", "hcct", 0, epochs=1)
    path = job_path(str(tmp_path), job)
    (tmp_path / "g").mkdir()
    result = run_experiment(cfg, progress=False)
    with open(path, "w") as f:
        json.dump(result, f)
    said = []
    assert pending_jobs([job], str(tmp_path), log=said.append) == []
    on = with_settings([job], norm_limit=20.0)
    assert pending_jobs(on, str(tmp_path), log=said.append) == on
    assert said[-1].endswith("its norm_limit is 0.0, the run asks for 20.0")


def test_cuda_graphs_is_how_a_run_ran_not_what_it_computed(tmp_path):
    cfg = make_config("rotated-digits", "hcct", 0, epochs=1)
    result = run_experiment(cfg, progress=False)
    result["config"].update(device="cuda", cuda_graphs=True)  # as a GPU run with graphs stores it
    result["provenance"]["device"] = "cuda:0"
    path = tmp_path / "r.json"
    path.write_text(json.dumps(result))
    assert reuse_problem(str(path), cfg) is None


@pytest.mark.parametrize(
    ("switch", "said"),
    [
        (["--cuda-graphs"], "cuda_graphs needs a GPU"),
        (["--norm-limit", "1"], "norm_limit must be 0 (off) or a factor >= 2"),
    ],
)
def test_reproduce_switches_reach_every_run_and_bad_ones_are_named(tmp_path, capsys, switch, said):
    from hcct_lite.cli import main

    argv = ["reproduce", "--grids", "motivating", "--out", str(tmp_path), "--no-report"]
    assert main(argv + switch) == 2
    assert said in capsys.readouterr().err
    assert not any(tmp_path.iterdir())  # refused before any run


def _clients(task="rotated-digits", **kw):
    return build_clients(make_config(task, "independent", 0, **kw))


def _train_both(model_name, clients, epochs=3, batch_size=16):
    """Every client trained ``epochs`` times by both trainers on the GPU, from one start."""
    torch.manual_seed(0)
    model = build_model(model_name).cuda()
    start = {k: v.clone() for k, v in model.state_dict().items()}
    eager = SGDTrainer(build_model(model_name), 2, batch_size, seed=3, device="cuda")
    graphed = GraphedSGDTrainer(build_model(model_name), 2, batch_size, seed=3, device="cuda")
    data = {i: c for i, c in enumerate(clients)}
    out = []
    for trainer in (eager, graphed):
        states = dict.fromkeys(data, start)
        for epoch in range(epochs):
            res = trainer.train(states, data, 0.05, epoch)
            states = {i: r.state for i, r in res.items()}
        out.append(res)
    return out


def _worst(a, b) -> float:
    """The largest difference of any state entry of any client between two trainings."""
    return max(
        float((v.float() - b[i].state[k].float()).abs().max())
        for i in a
        for k, v in a[i].state.items()
    )


@gpu
def test_graphed_steps_train_as_eager_ones_with_batch_norm_and_a_short_last_batch():
    clients = _clients(n_clients=4, samples=90, model="digit_cnn_small")  # 45: 16, 16, 13
    eager, graphed = _train_both("digit_cnn_small", clients)
    eager_again = _train_both("digit_cnn_small", clients)[0]
    # Two eager trainings already differ (cuDNN's backward sums in no fixed order: 0.09 to
    # 0.13 in a batch-norm mean on an H100); the graphs' trainings may differ as much, not
    # more. A wrong replay (stale inputs, a frozen batch, a missed update) differs by the
    # size of the weights themselves.
    noise = _worst(eager, eager_again)
    assert _worst(eager, graphed) <= 3 * noise + 1e-3, (_worst(eager, graphed), noise)
    for i in eager:
        assert graphed[i].train_loss == pytest.approx(eager[i].train_loss, rel=0.05)
        assert graphed[i].n_samples == eager[i].n_samples == 45


@gpu
def test_graphed_dropout_draws_from_the_seeded_stream_at_every_replay():
    clients = _clients("fmnist", n_clients=3, samples=60, dataset="digits")
    assert len({c.y_train.shape[0] for c in clients}) > 1  # several last-batch sizes
    eager, graphed = _train_both("fmnist_mlp_dropout", clients)
    again = _train_both("fmnist_mlp_dropout", clients)[1]
    for i in eager:  # the same seeds give the same masks; graphs must not freeze one mask
        assert torch.equal(graphed[i].update.flat, again[i].update.flat)
        assert graphed[i].train_loss == pytest.approx(eager[i].train_loss, rel=0.2)


@gpu
def test_a_run_with_graphs_ends_where_the_eager_run_does():
    kw = dict(epochs=4, device="cuda")
    eager = run_experiment(make_config("rotated-digits", "hcct", 0, **kw), progress=False)
    graphed = run_experiment(
        make_config("rotated-digits", "hcct", 0, cuda_graphs=True, **kw), progress=False
    )
    assert [h["groups"] for h in graphed["history"]] == [h["groups"] for h in eager["history"]]
    assert graphed["final"]["mean"] == pytest.approx(eager["final"]["mean"], abs=1.0)


@gpu
def test_graphs_with_a_backend_of_other_clients_are_refused():
    cfg = make_config("rotated-digits", "hcct", 0, cuda_graphs=True, device="cuda")
    with pytest.raises(ValueError, match="cuda_graphs applies to clients trained in this"):
        run_experiment(cfg, progress=False, backend=object())
