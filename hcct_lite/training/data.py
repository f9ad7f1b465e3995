"""Image data sets held in memory as uint8 tensors.

:func:`load_dataset` looks in ``$HCCT_DATA_DIR``, then the data root, then torchvision.
MNIST-M and SynthDigits are not in torchvision: put ``mnistm.npz`` and ``synthdigits.npz``
in ``HCCT_DATA_DIR`` (``docs/data.md``). scikit-learn's 8x8 ``digits`` need no file.
"""

from __future__ import annotations

import os
import zipfile
from dataclasses import dataclass

import numpy as np
import torch

__all__ = [
    "ImageSet",
    "DataNotFoundError",
    "load_dataset",
    "find_npz",
    "DATASETS",
    "default_data_root",
    "PAPER_DOMAINS",
    "digit_source",
    "fmnist_source",
    "cifar_source",
]

# the Digit task's domains (FedBN's), in the paper's order
PAPER_DOMAINS = ["mnist", "svhn", "usps", "synthdigits", "mnistm"]

# name -> (npz file stem, torchvision class name or None)
DATASETS = {
    "mnist": ("mnist", "MNIST"),
    "fashion_mnist": ("fashion_mnist", "FashionMNIST"),
    "cifar10": ("cifar10", "CIFAR10"),
    "svhn": ("svhn", "SVHN"),
    "usps": ("usps", "USPS"),
    "mnistm": ("mnistm", None),
    "synthdigits": ("synthdigits", None),
    "digits": (None, None),  # scikit-learn's bundled 8x8 digits
}
ALIASES = {
    "fmnist": "fashion_mnist",
    "fashion-mnist": "fashion_mnist",
    "mnist-m": "mnistm",
    "mnist_m": "mnistm",
    "cifar-10": "cifar10",
    "synth": "synthdigits",
}


class DataNotFoundError(FileNotFoundError):
    """A data set is neither in ``HCCT_DATA_DIR`` nor obtainable through torchvision."""


@dataclass
class ImageSet:
    """A data set in memory.

    Attributes
    ----------
    name : str
    x : torch.Tensor (N, C, H, W) uint8
    y : torch.Tensor (N,) int64
    split : torch.Tensor (N,) uint8, 0 = official train, 1 = official test, 2 = unknown
    """

    name: str
    x: torch.Tensor
    y: torch.Tensor
    split: torch.Tensor

    def __len__(self) -> int:
        return int(self.y.shape[0])

    @property
    def num_classes(self) -> int:
        """Number of classes (labels are 0..C-1)."""
        return int(self.y.max()) + 1


def default_data_root() -> str:
    """Where torchvision data sets are looked for and downloaded (``~/.cache/hcct_lite``)."""
    return os.path.join(os.path.expanduser("~"), ".cache", "hcct_lite")


def canonical_name(name: str) -> str:
    key = ALIASES.get(name.lower(), name.lower())
    if key not in DATASETS:
        raise ValueError(f"unknown data set {name!r}; choose from {sorted(DATASETS)}")
    return key


def _from_arrays(name, x, y, split) -> ImageSet:
    x = np.asarray(x)
    if x.dtype != np.uint8:
        raise ValueError(f"data set {name!r}: x must be uint8, got {x.dtype}")
    if x.ndim == 3:
        x = x[:, None, :, :]
    elif x.ndim == 4 and x.shape[-1] in (1, 3):
        x = x.transpose(0, 3, 1, 2)
    else:
        raise ValueError(f"data set {name!r}: x must be (N, H, W) or (N, H, W, C); got {x.shape}")
    y = np.asarray(y).astype(np.int64).reshape(-1)
    split = np.asarray(split).astype(np.uint8).reshape(-1)
    if not len(x) == len(y) == len(split):
        raise ValueError(f"data set {name!r}: x, y and official_split lengths differ")
    return ImageSet(
        name,
        torch.from_numpy(np.ascontiguousarray(x)),
        torch.from_numpy(y),
        torch.from_numpy(split),
    )


CLASSES = 10  # every data set here has ten classes


def _check_labels(y, where: str) -> None:
    """Raise ``ValueError`` (starting with ``where``) unless ``y`` holds class ids 0..9."""
    y = np.asarray(y).reshape(-1)
    if not (np.issubdtype(y.dtype, np.integer) or np.issubdtype(y.dtype, np.floating)):
        raise ValueError(f"{where} are {y.dtype}, not integers")
    bad = ~np.isfinite(y) if np.issubdtype(y.dtype, np.floating) else np.zeros(len(y), bool)
    with np.errstate(invalid="ignore"):
        bad |= (y < 0) | (y >= CLASSES) | (y != np.floor(y))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(
            f"{where} must be integers in 0..{CLASSES - 1}; sample {i} has {y[i].item()!r} "
            f"({int(bad.sum())} bad label(s) in all); replace the file with a fresh copy"
        )


def _load_npz(name, path) -> ImageSet:
    with open(path, "rb") as f:
        if f.read(2) != b"PK":  # an .npz is a zip archive
            raise ValueError(
                f"{path}: the {name} data file is not an .npz archive (it is not a zip file); "
                "replace it with a fresh copy"
            )
    try:
        with np.load(path, allow_pickle=False) as d:
            missing = {"x", "y"} - set(d.files)
            if missing:
                raise ValueError(f"{path}: missing arrays {sorted(missing)}")
            split = d["official_split"] if "official_split" in d.files else np.full(len(d["y"]), 2)
            _check_labels(d["y"], f"{path}: the {name} labels")
            return _from_arrays(name, d["x"], d["y"], split)
    except (OSError, EOFError, zipfile.BadZipFile, ValueError) as err:
        if str(err).startswith(str(path)):
            raise
        raise ValueError(
            f"{path}: the {name} data file is corrupt or not an .npz archive "
            f"({type(err).__name__}: {err}); replace it with a fresh copy"
        ) from None


def _load_digits() -> ImageSet:
    from sklearn.datasets import load_digits

    bunch = load_digits()
    # pixel values 0..16 -> 0..255
    x = np.clip(np.rint(bunch.images * (255.0 / 16.0)), 0, 255).astype(np.uint8)
    return _from_arrays("digits", x, bunch.target, np.full(len(bunch.target), 2, np.uint8))


def _load_torchvision(name, cls_name, root, download) -> ImageSet:
    import torchvision

    cls = getattr(torchvision.datasets, cls_name)
    parts = []
    for split_id, kwargs in (
        (0, _train_kwargs(cls_name, True)),
        (1, _train_kwargs(cls_name, False)),
    ):
        ds = cls(root=os.path.join(root, cls_name), download=download, **kwargs)
        data = ds.data.numpy() if hasattr(ds.data, "numpy") else np.asarray(ds.data)
        if cls_name == "SVHN":  # stored (N, 3, H, W)
            data = data.transpose(0, 2, 3, 1)
        labels = np.asarray(getattr(ds, "targets", None) if hasattr(ds, "targets") else ds.labels)
        parts.append((data.astype(np.uint8), labels, np.full(len(labels), split_id, np.uint8)))
    x, y, s = (np.concatenate(p) for p in zip(*parts, strict=True))
    return _from_arrays(name, x, y, s)


def _train_kwargs(cls_name, train):
    if cls_name == "SVHN":
        return {"split": "train" if train else "test"}
    return {"train": train}


def find_npz(name: str, data_root: str | None = None) -> str | None:
    """Path of ``<name>.npz`` in ``HCCT_DATA_DIR`` or the data root, else None (no loading)."""
    stem = DATASETS[canonical_name(name)][0]
    if stem is None:
        return None
    for folder in (os.environ.get("HCCT_DATA_DIR"), data_root or default_data_root()):
        if folder and os.path.isfile(os.path.join(folder, f"{stem}.npz")):
            return os.path.join(folder, f"{stem}.npz")
    return None


def load_dataset(name: str, data_root: str | None = None, download: bool = True) -> ImageSet:
    """Load a data set into memory, from the first place that has it.

    1. ``$HCCT_DATA_DIR/<file>.npz`` with arrays ``x`` (N, H, W) or (N, H, W, 3) uint8,
       ``y`` int labels and ``official_split`` (0 train, 1 test, 2 unknown);
    2. the same ``.npz`` under ``data_root`` (default ``~/.cache/hcct_lite``);
    3. torchvision's own class under ``data_root``, downloading when ``download`` allows.

    Raises
    ------
    DataNotFoundError
        One message naming the data set, ``HCCT_DATA_DIR`` and the download that failed.
    """
    key = canonical_name(name)
    if key == "digits":
        return _load_digits()
    stem, cls_name = DATASETS[key]
    root = data_root or default_data_root()
    env_dir = os.environ.get("HCCT_DATA_DIR")
    path = find_npz(key, data_root)
    if path is not None:
        return _load_npz(key, path)
    where = f"HCCT_DATA_DIR={env_dir!r}" if env_dir else "HCCT_DATA_DIR is not set"
    if cls_name is None:
        raise DataNotFoundError(
            f"data set {key!r} not found: no {stem}.npz in HCCT_DATA_DIR ({where}) or in "
            f"{root}; torchvision has no {key} download, see docs/data.md for where to get it"
        )
    try:
        return _load_torchvision(key, cls_name, root, download)
    except Exception as err:  # torchvision raises many kinds: report one clear line
        how = "download failed" if download else "downloads are disabled"
        raise DataNotFoundError(
            f"data set {key!r} not found: no {stem}.npz in HCCT_DATA_DIR ({where}) or {root}, "
            f"and torchvision.datasets.{cls_name} under {root}: {how} "
            f"({type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''})"
        ) from None


# --- what the paper's tasks run on where their data are missing (register_task's fallback)


def _found(name, data_root=None) -> bool:
    if find_npz(name, data_root) is not None:  # present offline: no need to load it here
        return True
    try:
        load_dataset(name, data_root=data_root, download=True)
        return True
    except DataNotFoundError:
        return False


def digit_source(data_root):
    """``(overrides, note)``: the Digit domains found here, or scikit-learn's digits."""
    found = [d for d in PAPER_DOMAINS if _found(d, data_root)]
    if not found:
        return {"domains": ["digits"], "model": "digit_cnn"}, (
            "no Digit domain found: using scikit-learn's digits as the only domain"
        )
    missing = [d for d in PAPER_DOMAINS if d not in found]
    note = f"Digit domains found: {', '.join(found)}" + (
        f"; missing (not downloadable here): {', '.join(missing)}" if missing else ""
    )
    return {"domains": found}, note if missing else ""


def fmnist_source(data_root):
    """``(overrides, note)``: Fashion-MNIST, else MNIST, else scikit-learn's digits."""
    for name, note in (
        ("fashion_mnist", ""),
        ("mnist", "Fashion-MNIST not found: MNIST in its place"),
    ):
        if _found(name, data_root):
            return {"dataset": name}, note
    return {"dataset": "digits", "model": "small_digits"}, (
        "neither Fashion-MNIST nor MNIST found: scikit-learn's digits in their place"
    )


def cifar_source(data_root):
    """``(overrides, note)``: CIFAR-10, else scikit-learn's digits and the small network."""
    if _found("cifar10", data_root):
        return {}, ""
    return {"dataset": "digits", "model": "small_digits"}, (
        "CIFAR-10 not found: scikit-learn's digits (and the small network) in its place"
    )
