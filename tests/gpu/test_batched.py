"""Batched clients: every client of an epoch trained at once computes what one at a time does.

In float64 the stacked networks give the one-client-at-a-time states, updates, statistics
and errors to rounding (the same batches in the same order); the tests marked ``gpu`` check
the float32 GPU path against eager steps (CI has no GPU; they run on a lent machine).
"""

import pytest
import torch
from torch import nn
from torch.func import functional_call

from hcct_lite.gpu.batched import BatchedSGDTrainer, step_plan
from hcct_lite.gpu.stacked import call_tensor, check_stackable, stacked_layouts, stacked_network
from hcct_lite.runs.jobs import Job, job_path
from hcct_lite.runs.runner import pending_jobs
from hcct_lite.runs.store import reuse_problem
from hcct_lite.training.config import make_config
from hcct_lite.training.engine import run_experiment
from hcct_lite.training.local import SGDTrainer, clone_state, evaluate
from hcct_lite.training.models import MODEL_INPUT, build_model
from hcct_lite.training.splits import ClientData


def gpu(test):
    """Marked ``gpu`` (conftest.py: ``slow`` too, ``pytest -m gpu``), skipped without CUDA."""
    needs = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
    return pytest.mark.gpu(needs(test))


def _clients(model, sizes, seed=0, dtype=torch.float64):
    side, ch = MODEL_INPUT[model]
    g = torch.Generator().manual_seed(seed)
    out = {}
    for i, n in enumerate(sizes):
        x = torch.randn((n + 9, ch, side, side), generator=g).to(dtype)
        y = torch.randint(0, 10, (n + 9,), generator=g)
        out[i] = ClientData(x[:n], y[:n], x[n:], y[n:], "d")
    return out


def _starts(model, n, dtype=torch.float64, device="cpu"):
    out = {}
    for i in range(n):  # every client from its own weights, batch-norm statistics included
        torch.manual_seed(100 + i)
        m = build_model(model).to(dtype)
        for b in m.buffers():
            if b.is_floating_point():
                b.add_(torch.rand_like(b))
        out[i] = {k: v.to(device) for k, v in clone_state(m.state_dict()).items()}
    return out


def _both(model, sizes, local_epochs=2, buffers=True, dtype=torch.float64, device="cpu"):
    net = build_model(model).to(dtype).to(device)
    if hasattr(net, "drop"):
        net.drop.p = 0.0  # dropout's draws differ by design; the arithmetic must not
    cl = _clients(model, sizes, dtype=dtype)
    starts = _starts(model, len(sizes), dtype, device)
    args = (net, local_epochs, 64, buffers, 3)
    eager = SGDTrainer(*args, device=device).train(starts, cl, 0.05, 4)
    batched = BatchedSGDTrainer(*args, device=device).train(starts, cl, 0.05, 4)
    return eager, batched, cl, net


# sizes: clients of other sizes (batch norm: trained in groups of one size), a last batch of
# one sample (skipped under batch norm), a client of fewer samples than a batch
# (the Digit network has the small one's kinds of layers; it is checked on a GPU, below)
@pytest.mark.parametrize(
    "model, sizes, local_epochs",
    [
        ("digit_cnn_small", [20, 65, 20], 1),
        ("small_digits", [130, 65, 64, 3, 200], 2),
        ("fmnist_mlp", [100, 29, 64], 2),
        ("fmnist_mlp_dropout", [70, 129], 2),
        ("cifar_cnn", [70, 20], 1),
    ],
)
def test_batched_clients_train_as_one_client_at_a_time_does(model, sizes, local_epochs):
    eager, batched, _, _ = _both(model, sizes, local_epochs)
    assert sorted(batched) == sorted(eager)
    for i, e in eager.items():
        b = batched[i]
        assert list(b.state) == list(e.state)
        for k in e.state:
            assert b.state[k].dtype == e.state[k].dtype
            assert torch.allclose(b.state[k], e.state[k], rtol=1e-9, atol=1e-11), (i, k)
        assert list(b.update) == list(e.update)
        assert torch.allclose(b.update.flat, e.update.flat, rtol=1e-8, atol=1e-9)
        assert b.n_samples == e.n_samples
        assert b.train_loss == pytest.approx(e.train_loss, rel=1e-9)
        assert b.train_acc == e.train_acc


@pytest.mark.parametrize("model", ["fmnist_mlp", "digit_cnn_small", "cifar_cnn", "small_digits"])
def test_a_stacked_fully_connected_weight_gets_its_gradient_in_its_own_layout(model):
    # A transposed gradient takes the SGD update off torch._foreach_add_'s fast path
    torch.manual_seed(0)
    one = build_model(model)
    net, rows, k = stacked_network(one), stacked_layouts(one), 3
    tensors = {
        n: call_tensor(torch.stack([t] * k), rows[n]).clone() for n, t in one.state_dict().items()
    }
    params = [tensors[n].requires_grad_() for n, _ in one.named_parameters()]
    side, ch = MODEL_INPUT[model]
    loss = functional_call(net, tensors, (torch.randn(5, k * ch, side, side),)).square().sum()
    grads = torch.autograd.grad(loss, params)  # as the batched trainer takes them
    linear = [(p, g) for p, g in zip(params, grads, strict=True) if p.dim() == 3]
    assert linear  # every one of these networks ends in fully connected layers
    for p, g in linear:
        assert p.shape[0] == k and g.stride() == p.stride()


class _OneLayer(nn.Module):
    stackable = True

    def __init__(self, bias):
        super().__init__()
        self.fc = nn.Linear(6, 5, bias=bias).double()

    def forward(self, x):
        return self.fc(x)


@pytest.mark.parametrize("bias, k", [(True, 1), (True, 4), (False, 3)])
def test_a_stacked_fully_connected_layer_is_each_clients_own_layer(bias, k):
    torch.manual_seed(k)
    clients = [_OneLayer(bias) for _ in range(k)]
    stacked = stacked_network(clients[0])
    state = {n: torch.stack([c.state_dict()[n] for c in clients]) for n in stacked.state_dict()}
    x = torch.randn(7, k, 6, dtype=torch.float64)
    out = functional_call(stacked, state, (x.reshape(7, k * 6),)).reshape(7, k, 5)
    for i, c in enumerate(clients):
        assert torch.allclose(out[:, i], c(x[:, i]), rtol=1e-12, atol=1e-14), i


def test_batch_norm_counters_count_the_steps_each_client_took():
    eager, batched, _, _ = _both("digit_cnn_small", [65, 20], local_epochs=3)
    for i in eager:  # 65 samples: two batches, the one-sample one skipped, for 3 epochs
        assert batched[i].state["bn1.num_batches_tracked"].item() == (
            eager[i].state["bn1.num_batches_tracked"].item()
        )
    assert batched[0].state["bn1.num_batches_tracked"].item() == 3
    assert batched[1].state["bn1.num_batches_tracked"].item() == 3


def test_batched_evaluation_gives_each_clients_own_error():
    eager, _, cl, net = _both("digit_cnn_small", [20, 30, 30], local_epochs=1)
    trainer = BatchedSGDTrainer(net, 1, 64)
    tests = {i: (c.x_test, c.y_test) for i, c in cl.items()}
    states = {i: r.state for i, r in eager.items()}
    for chunk in (1, 4, 512):  # padding and chunks change nothing
        got = trainer.evaluate(states, tests, chunk=chunk)
        assert got == {i: evaluate(net, states[i], *tests[i])[1] for i in cl}
    assert trainer.evaluate({}, {}) == {}


def test_step_plan_orders_pads_and_weights_the_batches():
    gens = [torch.Generator().manual_seed(s) for s in range(3)]
    plan = step_plan([130, 64, 3], 64, 2, gens, skip_single=False)
    assert plan["steps"].tolist() == [6, 2, 2]
    assert plan["active"].tolist() == [3, 3, 1, 1, 1, 1]  # the first client's 2nd epoch alone
    assert plan["width"].tolist() == [64, 64, 2, 64, 64, 2]
    assert plan["weight"][0, 2].sum() == 3 and plan["weight"][5, 0].sum() == 2
    assert plan["last"][:, 1].tolist() == [False, True, False, False, False, False]
    own = plan["idx"][plan["weight"] > 0]
    assert own.numel() == 2 * (130 + 64 + 3)
    for c, (lo, hi) in enumerate([(0, 130), (130, 194), (194, 197)]):  # own samples only
        mine = plan["idx"][:, c][plan["weight"][:, c] > 0]
        assert mine.min() >= lo and mine.max() < hi
        assert sorted(mine.tolist()) == sorted(list(range(lo, hi)) * 2)  # each once an epoch
    with pytest.raises(ValueError, match="order of their number of steps"):
        step_plan([3, 130], 64, 1, gens[:2], skip_single=False)


def test_models_that_mix_clients_are_refused_by_name():
    for bad in ("fmnist_mlp_authors",):  # its softmax over dimension 1 would mix clients
        with pytest.raises(ValueError, match="cannot train many clients at once"):
            check_stackable(build_model(bad))
        with pytest.raises(ValueError, match="FMNISTNet cannot train many clients"):
            make_config("fmnist", "hcct", 0, model=bad, batched_clients=True)

    class Odd(nn.Module):
        stackable = True

        def __init__(self):
            super().__init__()
            self.norm = nn.LayerNorm(4)

    with pytest.raises(ValueError, match="layer 'norm': LayerNorm layers cannot be stacked"):
        stacked_network(Odd())
    bn = build_model("digit_cnn_small")
    bn.bn1.momentum = None
    with pytest.raises(ValueError, match="layer 'bn1': batch norm needs running statistics"):
        check_stackable(bn)


@pytest.mark.parametrize(
    "kw, message",
    [
        (dict(batched_clients="yes"), "batched_clients must be a bool"),
        (dict(batched_clients=1), "batched_clients must be a bool"),
        (dict(gpu_precision="fp8"), "gpu_precision must be one of default, tf32, bf16"),
        (dict(gpu_precision=None), None),  # None: the default, as every override
        (dict(batched_clients=True, gpu_precision="bf16"), "applies to batched_clients on a GPU"),
        (dict(gpu_precision="tf32", device="cuda"), "applies to batched_clients on a GPU"),
        (dict(batched_clients=True, cuda_graphs=True, device="cuda"), "turn one off"),
    ],
)
def test_batched_settings_are_checked_naming_the_setting(kw, message):
    if message is None:
        assert make_config("rotated-digits", "hcct", 0, **kw).option("gpu_precision") == "default"
        return
    with pytest.raises(ValueError, match=message):
        make_config("rotated-digits", "hcct", 0, **kw)
    with pytest.raises(ValueError, match="needs a CUDA device"):
        BatchedSGDTrainer(build_model("small_digits"), 1, 16, gpu_precision="tf32")


def test_a_run_with_batched_clients_is_another_computation_for_reuse(tmp_path):
    job = Job("g", "hcct-seed0", "rotated-digits", "hcct", 0, {"epochs": 2})
    eager = run_experiment(make_config("rotated-digits", "hcct", 0, epochs=2), progress=False)
    cfg = make_config("rotated-digits", "hcct", 0, epochs=2, batched_clients=True)
    batched = run_experiment(cfg, progress=False)
    assert batched["config"]["batched_clients"] is True
    assert batched["history"][-1]["groups"] == eager["history"][-1]["groups"]
    assert batched["final"]["mean"] == pytest.approx(eager["final"]["mean"], abs=3.0)
    path = job_path(str(tmp_path), job)
    (tmp_path / "g").mkdir()
    import json

    with open(path, "w") as f:
        json.dump(batched, f)
    assert "batched_clients" in reuse_problem(
        path, make_config("rotated-digits", "hcct", 0, epochs=2)
    )
    assert reuse_problem(path, cfg) is None
    said = []
    assert pending_jobs([job], str(tmp_path), log=said.append) == [job]
    again = run_experiment(cfg, progress=False)  # the same seed: the same numbers on the CPU
    assert again["history"] == batched["history"]


def _gpu_pair(precision, samples=185):
    net = build_model("digit_cnn").cuda()
    cl = _clients("digit_cnn", [samples] * 3, dtype=torch.float32)
    starts = _starts("digit_cnn", 3, torch.float32, "cuda")
    args = (net, 1, 64, False, 3)
    eager = SGDTrainer(*args, device="cuda").train(starts, cl, 0.05, 1)
    batched = BatchedSGDTrainer(*args, device="cuda", gpu_precision=precision)
    return eager, batched.train(starts, cl, 0.05, 1)


@gpu
def test_on_a_gpu_batched_float32_steps_are_eager_ones_to_rounding():
    before = torch.backends.cudnn.allow_tf32
    torch.backends.cudnn.allow_tf32 = False  # true float32 on both sides (torch's TF32 convs off)
    try:
        # One step: from this random start each step multiplies a rounding difference 9 to
        # 25 times (an H200, cuDNN deterministic, the largest of three clients: 2.8e-4
        # after one step, 7.0e-3 after two, 8.2e-2 after three)
        eager, batched = _gpu_pair("default", samples=64)
    finally:
        torch.backends.cudnn.allow_tf32 = before
    for i in eager:
        e, b = eager[i].update.flat, batched[i].update.flat
        assert ((b - e).norm() / e.norm()).item() < 1e-3
        assert batched[i].train_loss == pytest.approx(eager[i].train_loss, rel=1e-4)


@gpu
@pytest.mark.parametrize("precision, cosine", [("tf32", 0.9), ("bf16", 0.7)])
def test_on_a_gpu_faster_arithmetic_moves_each_client_the_same_way(precision, cosine):
    eager, batched = _gpu_pair(precision)
    for i in eager:
        e, b = eager[i].update.flat, batched[i].update.flat
        assert torch.isfinite(b).all()
        assert (torch.dot(e, b) / (e.norm() * b.norm())).item() > cosine, precision


def test_a_client_without_training_or_test_samples_is_refused_by_number():
    cfg = make_config("rotated-digits", "hcct", 0, epochs=1, batched_clients=True)
    from hcct_lite.training.tasks import build_clients

    clients = build_clients(cfg)
    c = clients[5]
    clients[5] = ClientData(c.x_train, c.y_train, c.x_test[:0], c.y_test[:0], c.domain)
    with pytest.raises(ValueError, match="client 5 has 112 training and 0 test samples"):
        run_experiment(cfg, progress=False, clients=clients)


def test_a_grid_run_that_cannot_be_made_is_named():
    jobs = [
        Job(
            "fmnist-network",
            "x-seed0",
            "fmnist",
            "hcct",
            0,
            {"model": "fmnist_mlp_authors", "batched_clients": True},
        )
    ]
    with pytest.raises(ValueError, match="^fmnist-network/x-seed0: model FMNISTNet cannot"):
        pending_jobs(jobs, "/nonexistent-folder", log=None)


def test_reproduce_with_batched_clients_on_the_cpu_says_so_in_one_line(tmp_path, capsys):
    from hcct_lite.cli import main

    argv = ["reproduce", "--grids", "motivating", "--dry-run", "--no-report"]
    assert main([*argv, "--out", str(tmp_path), "--batched-clients"]) == 0
    err = capsys.readouterr().err
    assert "note: --batched-clients on the CPU" in err and "stored and reused apart" in err
    assert main([*argv, "--out", str(tmp_path)]) == 0
    assert "--batched-clients" not in capsys.readouterr().err  # nothing said unasked
