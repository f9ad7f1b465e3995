"""Data sets, partitioners and the missing-data error."""

import os

import numpy as np
import pytest
import torch

from hcct_lite.training.config import make_config
from hcct_lite.training.data import DataNotFoundError, load_dataset
from hcct_lite.training.splits import (
    domain_split,
    halfnormal_counts,
    iid_halfnormal,
    make_clients,
    motivating_split,
    shards_halfnormal,
    to_float,
)
from hcct_lite.training.tasks import build_clients

DATA_DIR = os.environ.get("HCCT_DATA_DIR")
needs_data = pytest.mark.skipif(
    not DATA_DIR or not os.path.isdir(DATA_DIR), reason="HCCT_DATA_DIR is not set to a folder"
)


def test_embedded_digits_need_no_file():
    ds = load_dataset("digits")
    assert ds.x.shape == (1797, 1, 8, 8) and ds.x.dtype == torch.uint8
    assert ds.num_classes == 10 and int(ds.x.max()) == 255


@needs_data
@pytest.mark.parametrize(
    ("name", "shape"),
    [
        ("mnist", (70000, 1, 28, 28)),
        ("usps", (9298, 1, 16, 16)),
        ("mnistm", (9001, 3, 32, 32)),
        ("fmnist", (70000, 1, 28, 28)),
        ("cifar10", (12000, 3, 32, 32)),
    ],
)
def test_offline_npz_sets(name, shape):
    ds = load_dataset(name, download=False)
    assert tuple(ds.x.shape) == shape and ds.x.dtype == torch.uint8
    assert ds.y.dtype == torch.int64 and ds.num_classes == 10
    assert ds.split.shape == (shape[0],)


@needs_data
def test_digit_task_on_offline_domains():
    cfg = make_config(
        "digit", "hcct", 0, domains=["mnist", "usps", "mnistm"], n_clients=6, samples=40
    )
    clients = build_clients(cfg)
    assert [c.domain for c in clients] == ["mnist", "mnist", "usps", "usps", "mnistm", "mnistm"]
    assert all(c.x_train.shape[1:] == (3, 28, 28) for c in clients)
    assert all(c.size == 20 and c.y_test.shape == (20,) for c in clients)


def test_missing_data_is_one_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("HCCT_DATA_DIR", str(tmp_path))
    with pytest.raises(DataNotFoundError) as err:
        load_dataset("svhn", data_root=str(tmp_path), download=False)
    msg = str(err.value)
    assert "'svhn'" in msg and "HCCT_DATA_DIR" in msg and "downloads are disabled" in msg
    assert "\n" not in msg
    with pytest.raises(DataNotFoundError, match="torchvision has no synthdigits download"):
        load_dataset("synthdigits", data_root=str(tmp_path))
    with pytest.raises(ValueError, match="unknown data set"):
        load_dataset("imagenet")


def test_npz_in_the_data_dir_is_used(tmp_path, monkeypatch):
    x = np.arange(4 * 5 * 5 * 3, dtype=np.uint8).reshape(4, 5, 5, 3)
    np.savez(
        tmp_path / "synthdigits.npz",
        x=x,
        y=np.array([0, 1, 2, 3]),
        official_split=np.array([0, 0, 1, 1]),
    )
    monkeypatch.setenv("HCCT_DATA_DIR", str(tmp_path))
    ds = load_dataset("synthdigits")
    assert ds.x.shape == (4, 3, 5, 5) and ds.split.tolist() == [0, 0, 1, 1]
    assert torch.equal(ds.x[1].permute(1, 2, 0), torch.from_numpy(x[1]))


@pytest.mark.parametrize(
    ("labels", "words"),
    [
        ([0, 1, 99, 3], "sample 2 has 99"),
        ([0, -1, 2, 3], "sample 1 has -1"),
        ([0.0, 1.0, np.nan, 3.0], "sample 2 has nan"),
        ([0.0, 1.5, 2.0, 3.0], "sample 1 has 1.5"),
    ],
)
def test_a_data_file_with_bad_labels_is_named(tmp_path, monkeypatch, labels, words):
    x = np.zeros((4, 5, 5), dtype=np.uint8)
    path = tmp_path / "synthdigits.npz"
    np.savez(path, x=x, y=np.array(labels), official_split=np.array([0, 0, 1, 1]))
    monkeypatch.setenv("HCCT_DATA_DIR", str(tmp_path))
    with pytest.raises(ValueError) as err:
        load_dataset("synthdigits")
    msg = str(err.value)
    assert msg.startswith(str(path)) and "labels must be integers in 0..9" in msg and words in msg


def test_halfnormal_counts_and_iid_split():
    rng = np.random.default_rng(0)
    counts = halfnormal_counts(20, 2400, rng, minimum=2)
    assert counts.min() >= 2 and counts.sum() <= 2400 and counts.std() > 10
    parts = iid_halfnormal(1000, 20, 1000, np.random.default_rng(1))
    flat = np.concatenate(parts)
    assert len(set(flat.tolist())) == flat.size  # disjoint


def test_shards_are_single_class():
    y = np.repeat(np.arange(10), 120)
    parts = shards_halfnormal(y, 10, 1200, np.random.default_rng(0))
    sizes = [p.size for p in parts]
    assert all(s % 12 == 0 and s > 0 for s in sizes)  # whole shards of 12
    assert sum(sizes) <= 1200
    for p in parts:  # a client's shards: each shard one class
        labels = y[p]
        assert len(np.unique(labels)) <= p.size // 12


def test_motivating_split():
    y = np.repeat(np.arange(10), 100)
    a, b, c = motivating_split(y, np.random.default_rng(0))
    assert set(y[a]) <= set(range(5)) and set(y[b]) <= set(range(5))
    assert set(y[c]) == set(range(5, 10)) and c.size == 500
    assert a.size == 100 and b.size == 400


def test_domain_split_is_even_and_consecutive():
    out = domain_split({"a": 100, "b": 100}, 4, 10, np.random.default_rng(0))
    assert [d for d, _ in out] == ["a", "a", "b", "b"]
    with pytest.raises(ValueError, match="domain 'b'"):
        domain_split({"a": 100, "b": 15}, 4, 10, np.random.default_rng(0))


def test_to_float_resizes_and_repeats_channels():
    x = torch.full((2, 1, 16, 16), 255, dtype=torch.uint8)
    out = to_float(x, size=28, channels=3)
    assert out.shape == (2, 3, 28, 28)
    assert torch.allclose(out, torch.ones_like(out))


def test_make_clients_names_a_client_too_small():
    ds = load_dataset("digits")
    with pytest.raises(ValueError, match="client 1: only 1 samples"):
        make_clients(ds, [np.arange(10), np.arange(1)], 0.5, np.random.default_rng(0))
