"""DP-SGD at the silo, with Opacus: per-sample clipping, Gaussian noise, an accountant.

A crafted model in one training message can give the server back whole training images
(docs/deploy.md, "What a server can learn"). DP-SGD (Abadi et al., 2016) bounds what any
one sample can change, and Opacus' RDP accountant adds up the silo's (epsilon, delta) over
the run. Off by default: a silo turns it on in its node config (``dp-noise-multiplier``).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import torch
from torch import nn

from ..training.local import LocalResult, clone_state, load_state, update_of

__all__ = ["DPSettings", "dp_settings", "private_train", "epsilon"]

RDP_ORDERS = [1.5, *range(2, 33), 40, 48, 56, 64, 80, 96, 128, 192, 256]
DP_KEYS = ("dp-noise-multiplier", "dp-max-grad-norm", "dp-delta", "dp-max-epsilon")


@dataclass(frozen=True)
class DPSettings:
    """A silo's DP-SGD settings (its node config's ``dp-*`` keys).

    Attributes
    ----------
    noise_multiplier : float > 0, the noise's standard deviation over ``max_grad_norm``
    max_grad_norm : float > 0, each sample's gradient is clipped to this norm
    delta : float in (0, 1), the delta of the reported (epsilon, delta)
    max_epsilon : float >= 0, the budget: a training that would spend more is refused
        (0: none)
    """

    noise_multiplier: float
    max_grad_norm: float = 1.0
    delta: float = 1e-5
    max_epsilon: float = 0.0


def _number(node_config, key: str, default: float) -> float:
    value = node_config.get(key, default)
    try:
        x = float(value) if not isinstance(value, bool) else math.nan
    except (TypeError, ValueError):
        x = math.nan
    if not math.isfinite(x):
        raise ValueError(f"node config {key} must be a finite number; got {value!r}")
    return x


def dp_settings(node_config) -> DPSettings | None:
    """The silo's :class:`DPSettings`, or None where ``dp-noise-multiplier`` is 0 or unset.

    A malformed or out-of-range value raises ``ValueError`` naming its key.
    """
    sigma = _number(node_config, "dp-noise-multiplier", 0.0)
    if sigma == 0:
        return None
    s = DPSettings(
        sigma,
        _number(node_config, "dp-max-grad-norm", 1.0),
        _number(node_config, "dp-delta", 1e-5),
        _number(node_config, "dp-max-epsilon", 0.0),
    )
    checks = {
        "dp-noise-multiplier": s.noise_multiplier > 0,
        "dp-max-grad-norm": s.max_grad_norm > 0,
        "dp-delta": 0 < s.delta < 1,
        "dp-max-epsilon": s.max_epsilon >= 0,
    }
    for key, ok in checks.items():
        if not ok:
            raise ValueError(f"node config {key} is out of range; got {getattr(s, _field(key))}")
    return s


def _field(key: str) -> str:
    return key.removeprefix("dp-").replace("-", "_")


def epsilon(history, delta: float) -> float:
    """The epsilon spent by ``history`` (``[(noise_multiplier, sample_rate, steps), ...]``)."""
    from opacus.accountants import RDPAccountant

    accountant = RDPAccountant()
    accountant.history = [tuple(h) for h in history]
    # whole orders only: Opacus' fractional ones are slow for a bound a little tighter;
    # any set of orders gives a valid one
    return float(accountant.get_epsilon(delta, alphas=RDP_ORDERS)) if history else 0.0


def private_train(
    model: nn.Module,
    start: dict,
    data,
    lr: float,
    seed: int,
    local_epochs: int,
    batch_size: int,
    settings: DPSettings,
    history=(),
) -> tuple:
    """DP-SGD of ``model`` from ``start`` on ``data``'s training split.

    ``seed`` seeds the Poisson sampling and the noise; ``history`` is what the silo spent
    before (``[(noise_multiplier, sample_rate, steps), ...]``). Returns ``(LocalResult,
    history now, epsilon now)``. The result's loss and accuracy are 0 (withheld): they are
    exact functions of the data, which DP-SGD does not cover (ten of them read the label
    histogram). Raises ``PermissionError`` if the training would spend more than
    ``max_epsilon``, and ``ValueError`` for a model DP-SGD cannot train per sample (batch
    norm).
    """
    from opacus import GradSampleModule
    from opacus.data_loader import DPDataLoader
    from opacus.optimizers import DPOptimizer
    from opacus.validators import ModuleValidator

    model.train()  # the validator judges the model as it will train
    if problems := ModuleValidator.validate(model, strict=False):
        raise ValueError(f"DP-SGD cannot train this model per sample: {problems[0]}")
    x, y = data.x_train, data.y_train
    gen = torch.Generator().manual_seed(seed)
    loader = DPDataLoader.from_data_loader(
        torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=batch_size),
        generator=gen,
    )
    rate, steps = loader.sample_rate, local_epochs * len(loader)
    spent = [*map(tuple, history), (settings.noise_multiplier, rate, steps)]
    eps = epsilon(spent, settings.delta)
    if settings.max_epsilon and eps > settings.max_epsilon:
        raise PermissionError(
            f"this training would bring the silo's epsilon to {eps:.3g}, over its budget "
            f"{settings.max_epsilon:g} (node config dp-max-epsilon)"
        )
    load_state(model, start)
    private = GradSampleModule(model)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = DPOptimizer(
        torch.optim.SGD(params, lr=lr),
        noise_multiplier=settings.noise_multiplier,
        max_grad_norm=settings.max_grad_norm,
        expected_batch_size=batch_size,
        generator=gen,
    )
    loss_fn = nn.CrossEntropyLoss()
    with warnings.catch_warnings():  # Opacus' hooks fire on inputs that need no gradient
        warnings.filterwarnings("ignore", message="Full backward hook is firing")
        for _ in range(local_epochs):
            for xb, yb in loader:
                optimizer.zero_grad()
                loss_fn(private(xb), yb).backward()
                optimizer.step()
    private._close()
    end = clone_state(model.state_dict())
    names = [k for k, _ in model.named_parameters()]
    return LocalResult(end, update_of(start, end, lr, names), int(y.shape[0]), 0.0, 0.0), spent, eps
