"""tools/gpu_data.py: an archive of data sets is checked whole and never replaces a file."""

import io
import sys
import tarfile
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_batched_steps import TASKS, task_config  # noqa: E402
from gpu_data import _federations, federation, main, unpack  # noqa: E402

from hcct_lite.training.config import make_config  # noqa: E402


def _archive(path, members):
    with tarfile.open(path, "w:xz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def _npz(**arrays):
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


GOOD = dict(x=np.zeros((3, 2, 2), np.uint8), y=np.arange(3), official_split=np.zeros(3, np.uint8))


def test_unpack_writes_checked_members_and_replaces_nothing_unless_forced(tmp_path):
    _archive(tmp_path / "a.tar.xz", {"usps.npz": _npz(**GOOD)})
    unpack(str(tmp_path / "a.tar.xz"), str(tmp_path / "d"))
    assert np.load(tmp_path / "d" / "usps.npz")["y"].tolist() == [0, 1, 2]
    with pytest.raises(SystemExit, match="usps.npz exists; unpack elsewhere, or --force"):
        unpack(str(tmp_path / "a.tar.xz"), str(tmp_path / "d"))
    unpack(str(tmp_path / "a.tar.xz"), str(tmp_path / "d"), force=True)


@pytest.mark.parametrize(
    "members, message",
    [
        ({"../evil.npz": b"x"}, "unexpected member '../evil.npz'"),
        ({"notes.txt": b"x"}, "unexpected member 'notes.txt'"),
        ({"b.npz": b"garbage"}, "not a data set archive member"),
        ({"b.npz": _npz(x=GOOD["x"], y=GOOD["y"])}, "not a data set archive member"),
        ({"b.npz": _npz(**dict(GOOD, y=np.arange(3.0)))}, "y is float64"),
    ],
)
def test_a_bad_member_stops_the_unpack_before_anything_is_written(tmp_path, members, message):
    _archive(tmp_path / "a.tar.xz", {"good.npz": _npz(**GOOD), **members})
    with pytest.raises(SystemExit, match=message):
        unpack(str(tmp_path / "a.tar.xz"), str(tmp_path / "d"))
    assert not (tmp_path / "d").exists()


def test_a_file_that_is_no_archive_is_named(tmp_path):
    (tmp_path / "a.tar.xz").write_text("hello")
    with pytest.raises(SystemExit, match="a.tar.xz: not a readable .tar.xz archive"):
        unpack(str(tmp_path / "a.tar.xz"), str(tmp_path / "d"))


def test_the_benchmarks_archive_holds_the_federations_the_gpu_benchmarks_build():
    packed = {federation(c) for c in _federations(None)}
    used = {federation(task_config(spec, "cpu")) for spec in TASKS}
    used.add(federation(make_config("cifar10", "hcct", 0)))  # bench_epoch_phases' default
    assert used == packed


@pytest.mark.parametrize(
    "argv",
    [["--grids", "schemes-digit", "--benchmarks", "--out", "a.tar.xz"], ["--benchmarks"],
     ["--out", "a.tar.xz"], []],
)  # fmt: skip
def test_packing_takes_grids_or_the_benchmarks_and_an_archive(argv, capsys):
    with pytest.raises(SystemExit) as stop:
        main(argv)
    assert stop.value.code == 2
    assert "give --grids or --benchmarks, and --out" in capsys.readouterr().err
