"""What a curious server reads from one silo's replies: images and label histograms.

For the small digits network (``fc1``: 64 pixels -> 64 units, ``fc2``: 64 -> 10 classes):

- :func:`imprint_model`: the "imprint" construction (Fowl et al., 2022, "Robbing the
  Fed"): every row of ``fc1`` measures an image's mean brightness, each row's bias a
  threshold a little higher than the last, and every column of ``fc2`` the same. A sample
  then reaches rows ``0..k`` exactly when its brightness passes threshold ``k``, so the
  difference between the updates of two neighbouring rows holds only the samples whose
  brightness falls between their thresholds; where that is one sample, the weight update
  divided by the bias update *is* that image (:func:`reconstruct`).
- :func:`histogram_from_bias`: a zero model, trained one message at a learning rate of
  1e-4 with batches that divide the silo's samples, moves its output bias by ``-lr x sum
  over batches of (1/10 - the batch's class shares)``: the label histogram.

Both read the model a silo sends back; :func:`recovered` counts the training images a
reconstruction holds to within ``tol`` per pixel.
"""

from __future__ import annotations

import numpy as np
import torch

__all__ = ["imprint_model", "reconstruct", "recovered", "histogram_from_bias"]


def imprint_model(model, brightness, seed: int = 0) -> dict:
    """The crafted state of ``model`` (small digits) with thresholds at ``brightness``'s
    quantiles (a public guess of the silo's images' mean brightness)."""
    state = {k: torch.zeros_like(v) for k, v in model.state_dict().items()}
    rows, pixels = state["fc1.weight"].shape
    state["fc1.weight"][:] = 1.0 / pixels  # every row: the mean brightness
    edges = np.quantile(np.asarray(brightness, dtype=np.float64), np.linspace(0, 1, rows + 2))
    state["fc1.bias"][:] = -torch.as_tensor(edges[1:-1], dtype=torch.float32)
    gen = torch.Generator().manual_seed(seed)
    column = torch.randn(state["fc2.weight"].shape[0], 1, generator=gen)
    state["fc2.weight"][:] = column  # the same for every row: each row's share is the same
    return state


def reconstruct(start: dict, end: dict) -> torch.Tensor:
    """(rows - 1, pixels) images read from two neighbouring rows' updates each."""
    dw = (start["fc1.weight"] - end["fc1.weight"]).double()
    db = (start["fc1.bias"] - end["fc1.bias"]).double()
    w, b = dw[:-1] - dw[1:], db[:-1] - db[1:]
    keep = b.abs() > 1e-12 * max(float(db.abs().max()), 1e-300)
    return (w[keep] / b[keep, None]).float()


def recovered(images: torch.Tensor, guesses: torch.Tensor, tol: float) -> int:
    """How many of ``images`` (n, pixels) some guess matches within ``tol`` on every pixel."""
    if len(guesses) == 0:
        return 0
    flat = images.reshape(len(images), -1).float()
    worst = (flat[:, None, :] - guesses[None, :, :]).abs().amax(dim=2)  # (n, guesses)
    return int((worst.amin(dim=1) <= tol).sum())


def histogram_from_bias(start: dict, end: dict, lr: float, n: int, batches: int) -> np.ndarray:
    """(10,) class counts read from the output bias's move (see the module's docstring)."""
    moved = (end["fc2.bias"] - start["fc2.bias"]).double().numpy() / lr
    # moved = -sum over batches of (1/10 - shares): shares summed = moved + batches / 10
    return (moved + batches / 10.0) * n / batches
