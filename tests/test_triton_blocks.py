"""The Triton convolution's block sizes: every setting the sweep tries computes the same
convolution, the sweep never chooses a setting that failed or was wrong, and tuned blocks
are validated before the kernels see them.

Correctness runs in Triton's interpreter (``TRITON_INTERPRET=1``, in a fresh process, float32
only), which ignores warps and stages; the timings need a card (``tools/gpu_kernels.sh``).
"""

import json
import math
import sys
from pathlib import Path

import pytest
import torch

triton = pytest.importorskip("triton")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_triton_blocks  # noqa: E402
import triton_conv  # noqa: E402
from bench_triton_blocks import NAMES, best, candidates, order, relative_error  # noqa: E402
from test_triton_conv import interpreted  # noqa: E402

_EVERY_SETTING = """
import json, sys
sys.path.insert(0, sys.argv[1])
from bench_triton_blocks import candidates, operands, reference_pass, relative_error, triton_pass
from triton_conv import PASSES, gemm_shape
out = []
for layer in json.loads(sys.argv[2]):
    o = operands(layer, 2, 2, __import__("torch").float32, "cpu", seed=len(out))
    for kind in PASSES:  # all three, a first layer's input gradient included
        want, seen = reference_pass(kind, o), set()
        for blocks in candidates(kind, *gemm_shape(kind, layer)):
            if blocks[:3] in seen:  # the interpreter ignores warps and stages
                continue
            seen.add(blocks[:3])
            out.append([kind, list(blocks), relative_error(triton_pass(kind, o, blocks), want)])
print(json.dumps(out))
"""


def test_every_block_size_the_sweep_tries_computes_torchs_convolution():
    layers = [(3, 5, 5, 2, 6), (4, 16, 3, 1, 5), (2, 3, 3, 0, 4)]  # ci, co, kernel, pad, side
    rows = interpreted(_EVERY_SETTING, layers, timeout=900)
    assert {kind for kind, _, _ in rows} == {"forward", "input", "weight"}
    assert len(rows) > 3 * 10  # many distinct settings per pass, not the first guess alone
    for kind, blocks, err in rows:
        assert err < 1e-5, (kind, blocks, err)  # float32 on the CPU: rounding alone


@pytest.mark.parametrize("kind", triton_conv.PASSES)
@pytest.mark.parametrize("ktot, co", [(75, 64), (1600, 128), (27, 16), (1152, 3)])
def test_candidates_start_with_the_first_guess_and_are_valid_and_distinct(kind, ktot, co):
    got = candidates(kind, ktot, co)
    assert got[0] == triton_conv.first_guess(kind, ktot, co)
    assert len(set(got)) == len(got) > 1
    for blocks in got:
        assert triton_conv.check_blocks(blocks) == blocks


def _row(ms, diff, error=None):
    return dict(blocks=[64, 64, 32, 4, 3], ms=ms, diff=diff, error=error)


def test_best_is_the_fastest_right_setting_never_a_failed_wrong_or_garbage_one():
    rows = [
        _row(0.5, 1e-3),
        _row(0.1, 0.5),
        _row(0.05, None, "OutOfResources: shared memory"),
        _row(math.nan, 1e-3),
        _row(-1.0, 1e-3),
        _row(0.0, 1e-3),
        _row(0.2, math.nan),
        _row(0.01, math.inf),
        _row("0.01", 1e-3),
        _row(None, 1e-3),
        _row(True, 1e-3),
        _row(0.3, 2e-2),
    ]
    assert best(rows, 3e-2)["ms"] == 0.3  # 0.3 is right at 2e-2; faster ones are wrong or junk
    assert best(rows, 1e-2)["ms"] == 0.5
    assert best(rows[1:6], 3e-2) is None  # only wrong, failed or garbage rows: no choice
    assert best([], 3e-2) is None
    assert best([_row(0.4, 3e-2)], 3e-2)["ms"] == 0.4  # the tolerance itself is right


def test_relative_error_is_infinite_for_another_shape_a_zero_reference_or_a_nan():
    a = torch.ones(2, 3)
    assert relative_error(a, a) == 0
    assert relative_error(a, torch.ones(3, 2)) == math.inf
    assert relative_error(a, torch.zeros(2, 3)) == math.inf
    assert relative_error(torch.full((2, 3), math.nan), a) == math.inf
    assert relative_error(2 * a, a) == pytest.approx(1.0)


def test_a_few_wrong_elements_that_the_norm_averages_away_are_still_wrong():
    want = torch.randn(100_000, generator=torch.Generator().manual_seed(0))
    got = want.clone()
    got[:30] = 0  # 30 of 100,000 elements lost: the norm's relative error is about 1.7e-2
    assert (got - want).norm() / want.norm() < 3e-2
    assert relative_error(got, want) > 3e-2
    assert best([dict(_row(0.1, relative_error(got, want)))], 3e-2) is None


def test_the_weight_passes_blocks_are_never_wider_than_the_problem():
    for ci, co, r, _, _ in triton_conv.LAYERS:
        ktot = r * r * ci
        for bm, bn, *_ in candidates("weight", ktot, co):
            assert bm <= max(16, triton.next_power_of_2(ktot)), (ci, co, r, bm)
            assert bn <= max(16, triton.next_power_of_2(co)), (ci, co, r, bn)


def test_winners_are_timed_again_in_turn_and_their_medians_kept(monkeypatch):
    calls, times = [], iter([5.0, 2.0, 1.0, 50.0, 2.2, 9.0, 5.2, 2.1, 1.1])
    monkeypatch.setattr(
        bench_triton_blocks, "bench", lambda fn: (calls.append(fn()), next(times))[1]
    )
    got = bench_triton_blocks.interleaved({"cudnn": lambda: "c", "first": lambda: "f",
                                           "best": lambda: "b"})  # fmt: skip
    assert calls == ["c", "f", "b"] * 3  # round-robin, not one function's timings in a row
    assert got == {"cudnn": 5.2, "first": 2.1, "best": 1.1}  # one outlier each changes nothing


def test_the_table_row_names_a_first_guess_that_failed_and_a_pass_with_nothing_right():
    rows = [_row(None, None, "OutOfResources: out of shared memory"), _row(0.5, 1e-3)]
    line, top = bench_triton_blocks.summary("Digit conv2", "weight", "bf16", rows,
                                            dict(cudnn=1.0, best=0.5), 2e9, 3e-2)  # fmt: skip
    assert top is rows[1]
    assert (
        "OutOfResources" in line
        and "| 0.500 | (64, 64, 32, 4, 3) | 2.00x | no right first guess |" in line
    )
    line, top = bench_triton_blocks.summary("Digit conv2", "weight", "bf16", [_row(0.5, 0.9)],
                                            dict(cudnn=1.0), 2e9, 3e-2)  # fmt: skip
    assert top is None and "| wrong | none right |" in line and "0 / 1" in line


def test_the_sweep_starts_with_digits_second_convolution_and_covers_every_layer():
    assert NAMES[order()[0]] == "Digit conv2"  # the most arithmetic in the GPU paper
    assert sorted(order()) == list(range(len(triton_conv.LAYERS))) == list(range(len(NAMES)))


@pytest.mark.parametrize(
    "blocks, message",
    [((64, 64, 32, 4), r"\(BM, BN, BK, warps, stages\)"), ("64,64,32,4,3", "BM, BN, BK"),
     ((48, 64, 32, 4, 3), "BM must be a power of two"),
     ((64, 8, 32, 4, 3), "BN must be an int >= 16"),
     ((64, 64, 32.0, 4, 3), "BK must be an int"), ((64, 64, 32, 3, 3), "warps must be a power"),
     ((64, 64, 32, 4, 0), "stages must be an int >= 1"), ((64, 64, 32, True, 3), "warps must be")],
)  # fmt: skip
def test_block_sizes_the_kernels_cannot_take_are_refused_naming_which(blocks, message):
    with pytest.raises(ValueError, match=message):
        triton_conv.check_blocks(blocks)


def test_tuned_blocks_are_loaded_validated_and_taken_before_the_first_guess(tmp_path, monkeypatch):
    monkeypatch.setattr(triton_conv, "TUNED", {})
    good = dict(best=[{"pass": "weight", "ci": 64, "co": 64, "r": 5, "arithmetic": "bf16",
                       "blocks": [128, 64, 64, 8, 3]}])  # fmt: skip
    path = tmp_path / "blocks.json"
    path.write_text(json.dumps(good))
    assert triton_conv.load_tuned(path) == 1
    pick = triton_conv.blocks_for
    assert pick("weight", (64, 64, 5), torch.bfloat16) == (128, 64, 64, 8, 3)
    guess = triton_conv.first_guess("weight", 1600, 64)
    assert pick("weight", (64, 64, 5), torch.float32) == guess  # tuned for bf16 only
    assert pick("forward", (64, 64, 5), torch.bfloat16) != (128, 64, 64, 8, 3)
    for row, message in [(dict(good["best"][0], blocks=[100, 64, 64, 8, 3]), "power of two"),
                         (dict(good["best"][0], **{"pass": "backward"}), "names no pass"),
                         (dict(good["best"][0], arithmetic="fp16"), "names no pass"),
                         (dict(good["best"][0], ci="64"), "names no pass, layer"),
                         (dict(good["best"][0], co=64.5), "names no pass, layer"),
                         (dict(good["best"][0], co=True), "names no pass, layer"),
                         (dict(good["best"][0], r=0), "names no pass, layer")]:  # fmt: skip
        path.write_text(json.dumps(dict(best=[row])))
        with pytest.raises(ValueError, match=message):
            triton_conv.load_tuned(path)
    assert triton_conv.TUNED == {("weight", 64, 64, 5, "bf16"): (128, 64, 64, 8, 3)}


@pytest.mark.parametrize("text", ["not json", "[]", '{"rows": []}', '{"best": [{"pass": "input"}]}',
                                  '{"best": [3]}'])  # fmt: skip
def test_a_file_that_is_not_a_sweeps_output_is_refused_naming_it_and_adds_nothing(
        text, tmp_path, monkeypatch):  # fmt: skip
    monkeypatch.setattr(triton_conv, "TUNED", {})
    path = tmp_path / "garbage.json"
    path.write_text(text)
    with pytest.raises(ValueError, match="garbage.json"):
        triton_conv.load_tuned(path)
    assert triton_conv.TUNED == {}


_POOL = """
import json, sys
sys.path.insert(0, sys.argv[1])
from bench_triton_blocks import precompile
print(json.dumps(precompile([tuple(t) for t in json.loads(sys.argv[2])], 2)))
"""


def test_the_precompile_pool_runs_every_setting_once_and_returns_each_failure():
    layer, ok = (4, 16, 3, 1, 5), [64, 16, 32, 4, 3]
    tasks = [[layer, kind, ok, "tf32", 2, 2] for kind in triton_conv.PASSES]
    tasks.append([layer, "forward", [48, 16, 32, 4, 3], "tf32", 2, 2])  # BM not a power of two
    errors = interpreted(_POOL, tasks)
    assert errors[:3] == [None, None, None]
    assert isinstance(errors[3], str) and "power of 2" in errors[3]


def test_the_sweep_precompiles_exactly_what_it_times_in_its_order():
    tasks = bench_triton_blocks.sweep_tasks(["bf16"], 20)
    assert len(tasks) == 284  # the count the lease's time budget is planned on
    assert tasks[0] == (triton_conv.LAYERS[1], "forward", triton_conv.first_guess(
        "forward", 1600, 64), "bf16", 20, 64)  # Digit conv2's first guess first  # fmt: skip
    layers = triton_conv.LAYERS
    swept = [(layers[i], kind, blocks) for i in order()
             for kind, settings in bench_triton_blocks.layer_candidates(layers[i])
             for blocks in settings]  # fmt: skip
    assert [t[:3] for t in tasks] == swept
    both = bench_triton_blocks.sweep_tasks(["bf16", "tf32"], 20)
    assert [t[3] for t in both] == ["bf16"] * 284 + ["tf32"] * 284
    assert not any(kind == "input" and layer[0] == 3 for layer, kind, *_ in tasks)


def test_a_pool_that_outlives_its_time_is_ended_with_an_error_not_awaited():
    script = _POOL.replace("2)))", "2, timeout=0.01)))")
    tasks = [[(4, 16, 3, 1, 5), "forward", [64, 16, 32, 4, 3], "tf32", 2, 2]] * 4
    with pytest.raises(AssertionError, match="TimeoutError"):
        interpreted(script, tasks)


_TUNED_REACH = """
import json, sys, torch
sys.path.insert(0, sys.argv[1])
import triton_conv as tc
seen = []
for name in ("implicit_gemm", "weight_gemm"):
    def record(*args, _real=getattr(tc, name), **kw):
        seen.append(list(args[-1]))
        return _real(*args, **kw)
    setattr(tc, name, record)
ci, co, r, g = 4, 16, 3, 2
tc.TUNED.update({("forward", ci, co, r, "tf32"): (64, 16, 16, 1, 1),
                 ("input", ci, co, r, "tf32"): (32, 16, 16, 2, 1),
                 ("weight", 8, 8, 3, "tf32"): (16, 16, 16, 4, 1)})  # another layer's
x = torch.randn(2, g * ci, 5, 5, requires_grad=True)
w = torch.randn(g * co, ci, r, r, requires_grad=True)
y = tc.grouped_conv2d(x, w, None, g, 1)
y.sum().backward()
print(json.dumps([seen, list(tc.first_guess("weight", r * r * ci, co))]))
"""


def test_the_convolution_takes_each_pass_tuned_blocks_for_its_own_layer_alone():
    (forward, inp, weight), guess = interpreted(_TUNED_REACH, None)
    assert forward == [64, 16, 16, 1, 1]
    assert inp == [32, 16, 16, 2, 1]  # keyed by the layer's (in, out), not the GEMM's swapped ones
    assert weight == guess  # tuned only for another layer: the first guess
