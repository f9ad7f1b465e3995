"""Pack the images some grids read into one small archive, for a machine without the data.

    HCCT_DATA_DIR=../shared/data python tools/gpu_data.py --grids schemes-digit ... --out d.tar.xz
    HCCT_DATA_DIR=../shared/data python tools/gpu_data.py --benchmarks --out b.tar.xz
    python tools/gpu_data.py --unpack d.tar.xz --to /tmp/data     # on the other machine

A lent GPU machine reaches no network and takes a working tree of limited size. The paper's
GPU grids read only some images of each data set (all of CIFAR-10's subset, part of MNIST's
70,000), so the archive keeps every data set's labels and splits whole and the images that
any run of the grids reads, with every other image zeroed: each run builds exactly the
clients it builds from the full files. ``--out`` checks that, run by run (a hash of every
client's tensors from both), before it writes; the members are uncompressed ``.npz`` files
in an xz archive, which compresses the zeros to nothing. ``--benchmarks`` packs instead the
clients of the GPU benchmarks' runs (``benchmarks/bench_batched_steps.py``,
``bench_epoch_phases.py``): a smaller archive, for a lease that needs no grid.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import os
import sys
import tarfile
from unittest import mock

import numpy as np

from hcct_lite.reproduction.paper_grids import grid_jobs
from hcct_lite.training import tasks
from hcct_lite.training.config import make_config
from hcct_lite.training.data import find_npz


def _federations(grids) -> list:
    """One config per distinct federation of the grids' runs (schemes share theirs).

    ``grids`` None: the federations of the GPU benchmarks' runs
    (``benchmarks/bench_batched_steps.py``'s tasks).
    """
    if grids is None:  # bench_epoch_phases' CIFAR-10 default is the N = 10 one
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                        "benchmarks"))  # fmt: skip
        from bench_batched_steps import TASKS, task_config

        return [task_config(spec, "cpu") for spec in TASKS]
    seen = {}
    for j in grid_jobs(grids):
        c = make_config(j.task, j.scheme, j.seed, **j.overrides)
        seen.setdefault(federation(c), c)
    return list(seen.values())


def federation(c) -> tuple:
    """The settings of a RunConfig ``c`` that decide which images its clients hold."""
    return (c.task, c.seed, c.n_clients, c.samples, c.train_ratio, tuple(c.domains), c.dataset,
            c.model)  # fmt: skip


def read_indices(grids) -> dict:
    """Data set name -> the sorted indices of every image some run of ``grids`` reads."""
    used, real = {}, tasks.make_clients

    def spy(dataset, parts, *args, **kw):
        used.setdefault(dataset.name, set()).update(int(i) for p in parts for i in p)
        return real(dataset, parts, *args, **kw)

    with mock.patch.object(tasks, "make_clients", spy):
        for c in _federations(grids):
            tasks.build_clients(c)
    return {k: np.array(sorted(v), dtype=np.int64) for k, v in used.items()}


def _digest(grids) -> str:
    h = hashlib.sha256()
    for c in _federations(grids):
        for cl in tasks.build_clients(c):
            for t in (cl.x_train, cl.y_train, cl.x_test, cl.y_test):
                h.update(t.numpy().tobytes())
    return h.hexdigest()


def pack(grids, out: str) -> None:
    """Write the images of ``grids`` (None: the benchmarks') to ``out``, checked run by run."""
    import tempfile

    used = read_indices(grids)
    for name in [n for n in used if find_npz(n) is None]:  # scikit-learn's, say: no file
        print(f"{name}: no .npz file; the other machine has it without one, or needs it")
        del used[name]
    full = _digest(grids)
    with tempfile.TemporaryDirectory() as tmp:
        for name, idx in used.items():
            d = np.load(find_npz(name))
            x = np.zeros_like(d["x"])
            x[idx] = d["x"][idx]
            np.savez(os.path.join(tmp, f"{name}.npz"), x=x, y=d["y"],
                     official_split=d["official_split"])  # fmt: skip
            print(f"{name}: {idx.size} of {len(x)} images kept")
        with mock.patch.dict(os.environ, {"HCCT_DATA_DIR": tmp}):
            if _digest(grids) != full:
                raise SystemExit("the packed images build other clients than the full files")
        with tarfile.open(out, "w:xz") as tar:
            for name in used:
                tar.add(os.path.join(tmp, f"{name}.npz"), arcname=f"{name}.npz")
    print(f"wrote {out} ({os.path.getsize(out) / 1e6:.1f} MB); every run's clients checked")


def _member_arrays(name: str, data: bytes) -> None:
    """Raise ``SystemExit`` unless ``data`` is an .npz of the data sets' three arrays."""
    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as d:
            arrays = {k: d[k] for k in ("x", "y", "official_split")}
    except (KeyError, ValueError, OSError) as err:
        raise SystemExit(f"{name}: not a data set archive member ({err})") from None
    want = {"x": np.uint8, "y": np.int64, "official_split": np.uint8}
    for k, a in arrays.items():
        if a.dtype != want[k] or len(a) != len(arrays["y"]):
            raise SystemExit(f"{name}: {k} is {a.dtype} of length {len(a)}")


def unpack(archive: str, to: str, force: bool = False) -> None:
    """Extract the ``.npz`` files of ``archive`` into the folder ``to``.

    Every member is checked (a plain name ending .npz, the three arrays with their types)
    before anything is written, and no file of ``to`` is replaced unless ``force``: the
    archive's zeroed images must never take the place of a full data set.
    """
    try:
        with tarfile.open(archive, "r:xz") as tar:
            members = {}
            for m in tar.getmembers():
                if not (m.isfile() and m.name.endswith(".npz") and "/" not in m.name):
                    raise SystemExit(f"{archive}: unexpected member {m.name!r}")
                members[m.name] = tar.extractfile(m).read()
    except (tarfile.TarError, OSError, EOFError) as err:
        raise SystemExit(f"{archive}: not a readable .tar.xz archive ({err})") from None
    for name, data in members.items():
        _member_arrays(f"{archive}: {name}", data)
        if os.path.exists(os.path.join(to, name)) and not force:
            raise SystemExit(f"{os.path.join(to, name)} exists; unpack elsewhere, or --force")
    os.makedirs(to, exist_ok=True)
    for name, data in members.items():
        with open(os.path.join(to, name), "wb") as f:
            f.write(data)
    print(f"unpacked {len(members)} data sets from {archive} into {to}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--grids", nargs="+", help="grids whose images to pack")
    p.add_argument("--benchmarks", action="store_true", help="pack the GPU benchmarks' images")
    p.add_argument("--out", help="archive to write (.tar.xz)")
    p.add_argument("--unpack", help="archive to extract")
    p.add_argument("--to", help="folder to extract into")
    p.add_argument("--force", action="store_true", help="replace data files already there")
    a = p.parse_args(argv)
    if a.unpack and a.to:
        unpack(a.unpack, a.to, a.force)
    elif (bool(a.grids) != a.benchmarks) and a.out:
        pack(a.grids, a.out)
    else:
        p.error("give --grids or --benchmarks, and --out; or --unpack and --to")
    return 0


if __name__ == "__main__":
    sys.exit(main())
