"""The lean engine's shortcuts compute exactly what the plain code computes, bit for bit."""

import numpy as np
import pytest
import torch

from hcct_lite.partition.updates import all_zero, gram_matrix
from hcct_lite.training.local import FlatUpdate, load_state, set_mode, update_of
from hcct_lite.training.models import build_model
from hcct_lite.training.replies import update_problem


def _states(seed):
    torch.manual_seed(seed)
    return build_model("small_digits").state_dict(), build_model("small_digits").state_dict()


def test_a_flat_update_is_the_per_entry_update_bit_for_bit():
    start, end = _states(0)
    names = [k for k in start if start[k].is_floating_point()]
    flat = update_of(start, end, 0.037, names)
    assert isinstance(flat, FlatUpdate) and flat.flat.shape == (sum(end[k].numel() for k in names),)
    for k in names:
        plain = (start[k].float() - end[k].float()).div_(0.037)
        assert torch.equal(flat[k], plain)
        assert flat[k].data_ptr() >= flat.flat.data_ptr()  # a view into the one vector


def test_the_gram_of_flat_updates_equals_the_per_entry_gram_exactly():
    ups = []
    for seed in range(6):
        start, end = _states(seed)
        names = [k for k, v in start.items() if v.is_floating_point()]
        ups.append(update_of(start, end, 0.1, names))
    plain = [{k: v.clone() for k, v in u.items()} for u in ups]  # no flat vector
    assert np.array_equal(gram_matrix(ups), gram_matrix(plain))


def test_the_update_screen_reads_the_flat_vector():
    start, end = _states(1)
    names = list(start)
    u = update_of(start, end, 0.1, names)
    assert update_problem(u) is None
    u.flat[3] = float("nan")
    assert update_problem(u) == "update has non-finite values"
    # a model that did not move is an honest reply; HCCT keeps that client alone
    zero = update_of(start, start, 0.1, names)
    assert update_problem(zero) is None and all_zero(zero)
    assert all_zero({k: v.clone() for k, v in zero.items()})
    zero.flat[0] = 1e-30  # its square underflows float32: not mistaken for zero
    assert not all_zero(zero) and not all_zero({"w": np.array([0.0, 1e-300])})


def test_load_state_is_load_state_dict_and_names_a_missing_entry():
    model = build_model("small_digits")
    start, _ = _states(2)
    load_state(model, start)
    for k, v in model.state_dict().items():
        assert torch.equal(v, start[k])
    other = build_model("small_digits")
    other.load_state_dict(start)
    pairs = zip(model.parameters(), other.parameters(), strict=True)
    assert all(torch.equal(a, b) for a, b in pairs)
    broken = dict(start)
    broken.pop(next(iter(broken)))
    with pytest.raises(RuntimeError, match="Missing key"):
        load_state(model, broken)
    set_mode(model, training=False)
    assert not any(m.training for m in model.modules())
    set_mode(model, training=True)
    assert all(m.training for m in model.modules())
