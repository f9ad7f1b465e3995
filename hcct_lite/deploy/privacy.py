"""DP-SGD at the silo, with Opacus: per-sample clipping, Gaussian noise, an accountant.

A crafted model in one training message can give the server back whole training images
(docs/deploy.md, "What a server can learn"). DP-SGD (Abadi et al., 2016) bounds what any
one sample can change, and Opacus' RDP accountant adds up the silo's (epsilon, delta). Off by
default: a silo turns it on in its node config (``dp-noise-multiplier``).

A budget (``dp-max-epsilon``) needs a ledger (``dp-ledger-dir``): a file in a private folder
that adds up the silo's spending over every run it serves. Flower's context lasts one run,
so a budget kept there would refill with each new run a server starts.
"""

from __future__ import annotations

import json
import math
import os
import stat
import warnings
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from ..training.local import LocalResult, clone_state, load_state, update_of

__all__ = ["DPSettings", "dp_settings", "private_train", "epsilon", "ledger", "LEDGER_FILE"]

RDP_ORDERS = [1.5, *range(2, 33), 40, 48, 56, 64, 80, 96, 128, 192, 256]
DP_KEYS = (
    "dp-noise-multiplier",
    "dp-max-grad-norm",
    "dp-delta",
    "dp-max-epsilon",
    "dp-ledger-dir",
)
LEDGER_FILE = "dp-ledger.json"
_MAX_LEDGER = 16 << 20  # one short entry per training: far more than any silo writes


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
    ledger : str, the absolute path of the private folder of the silo's ledger
        (:func:`ledger`), which adds up its spending over all its runs ("": none, the
        account lasts one run; allowed only without a budget)
    """

    noise_multiplier: float
    max_grad_norm: float = 1.0
    delta: float = 1e-5
    max_epsilon: float = 0.0
    ledger: str = ""


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

    A malformed or out-of-range value raises ``ValueError`` naming its key, and so does a
    budget without a ledger: kept in the run's context, it would refill with every run.
    """
    sigma = _number(node_config, "dp-noise-multiplier", 0.0)
    if sigma == 0:
        return None
    s = DPSettings(
        sigma,
        _number(node_config, "dp-max-grad-norm", 1.0),
        _number(node_config, "dp-delta", 1e-5),
        _number(node_config, "dp-max-epsilon", 0.0),
        _folder(node_config, "dp-ledger-dir"),
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
    if s.max_epsilon > 0 and not s.ledger:
        raise ValueError(
            "node config dp-max-epsilon needs dp-ledger-dir, the private folder of the "
            "silo's ledger: a budget kept per run would refill with every new run"
        )
    return s


def _folder(node_config, key: str) -> str:
    """The node config's ``key`` as an absolute path ("" if unset); ``~`` is expanded."""
    value = node_config.get(key, "")
    text = os.path.expanduser(value.strip()) if isinstance(value, str) else None
    # a ClientApp task's working folder is Flower's choice: a relative path would move
    if text is None or (text and not os.path.isabs(text)):
        raise ValueError(f"node config {key} must be an absolute path; got {value!r}")
    return text


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


def _entry(item) -> tuple | None:
    """A ledger entry as ``(noise_multiplier, sample_rate, steps)``, or None if it is none."""
    if not (isinstance(item, list) and len(item) == 3):
        return None
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in item):
        return None
    sigma, rate, steps = item
    if not (isinstance(steps, int) and 0 <= steps < 2**63):
        return None
    try:
        sigma, rate = float(sigma), float(rate)
    except OverflowError:  # a whole number too large for a float
        return None
    if not (math.isfinite(sigma) and sigma > 0 and 0 < rate <= 1):  # JSON allows NaN
        return None
    return sigma, rate, steps


def _read_ledger(folder_fd: int, path: Path) -> list:
    """The entries of the ledger ``path`` (in the open folder ``folder_fd``); none if missing.

    Anything else that is no list of entries raises ``ValueError`` naming the file.
    """
    refused = "; DP training refused rather than counted from zero (repair the file)"
    try:
        fd = os.open(LEDGER_FILE, os.O_RDONLY | os.O_NOFOLLOW, dir_fd=folder_fd)
    except FileNotFoundError:
        return []  # the silo's first DP training
    except OSError as err:  # a link (ELOOP), no permission, ...
        raise ValueError(f"{path}: cannot be read ({err.strerror}){refused}") from None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise ValueError(f"{path}: is not a regular file{refused}")
        data = f.read(_MAX_LEDGER + 1)
    try:
        items = json.loads(data) if len(data) <= _MAX_LEDGER else None
    except (UnicodeDecodeError, ValueError):
        items = None
    entries = [_entry(x) for x in items] if isinstance(items, list) else [None]
    if None in entries:
        raise ValueError(
            f"{path}: is not a DP ledger (a JSON list of [noise_multiplier, sample_rate, "
            f"steps]){refused}"
        )
    return entries


@contextmanager
def ledger(folder):
    """The silo's DP spending over all its runs, read from ``folder`` and held locked.

    Parameters
    ----------
    folder : str or Path
        A private folder of this user (made with mode 0700 if missing; anything else is
        refused, :func:`hcct_lite.runs.files.private_folder`). Its file
        :data:`LEDGER_FILE` is a JSON list of ``[noise_multiplier, sample_rate, steps]``.

    Yields
    ------
    tuple
        ``(history, record)``: the entries so far, and ``record(history)``, which
        replaces the ledger in one step (a reader never sees half of it).

    Notes
    -----
    While held, no other task of the silo reads or writes the ledger: two trainings cannot
    both spend the last of the budget. A ledger that cannot be read, or is no list of
    entries, raises ``ValueError`` naming it: it is never taken for an empty one.
    """
    import fcntl  # POSIX only, as the private folder's checks: imported where they are used

    from ..runs.files import private_folder, write_at

    path = Path(folder) / LEDGER_FILE
    folder_fd = private_folder(folder)
    try:
        flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW
        try:
            lock = os.open(f"{LEDGER_FILE}.lock", flags, 0o600, dir_fd=folder_fd)
        except OSError as err:
            raise ValueError(f"{path}.lock: cannot be opened ({err.strerror})") from None
        try:
            fcntl.flock(lock, fcntl.LOCK_EX)  # another task's training: wait for its entry
            history = _read_ledger(folder_fd, path)

            def record(entries) -> None:
                text = json.dumps([[float(s), float(q), int(n)] for s, q, n in entries])
                try:
                    write_at(folder_fd, LEDGER_FILE, text.encode())
                    # on disk before any reply: a power cut must not forget a training
                    # either (one cut mid-rename leaves an empty file, which is refused)
                    fd = os.open(LEDGER_FILE, os.O_RDONLY | os.O_NOFOLLOW, dir_fd=folder_fd)
                    try:
                        os.fsync(fd)
                    finally:
                        os.close(fd)
                    os.fsync(folder_fd)
                except OSError as err:
                    raise ValueError(
                        f"{path}: cannot be written ({err.strerror}); DP training refused"
                    ) from None

            yield history, record
        finally:
            os.close(lock)  # also releases the lock
    finally:
        os.close(folder_fd)


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
    record=None,
) -> tuple:
    """DP-SGD of ``model`` from ``start`` on ``data``'s training split.

    ``seed`` seeds the Poisson sampling and the noise; ``history`` is what the silo spent
    before (``[(noise_multiplier, sample_rate, steps), ...]``). ``record``, if given, is
    called with the history now once the budget allows the training, before its first
    step: the silo's ledger is written there, so that a crash can only over-count.
    Returns ``(LocalResult, history now, epsilon now)``. The result's loss and accuracy
    are 0 (withheld): they are exact functions of the data, which DP-SGD does not cover
    (ten of them read the label histogram). Raises ``PermissionError`` if the training
    would spend more than ``max_epsilon``, and ``ValueError`` for a model DP-SGD cannot
    train per sample (batch norm).
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
    if record is not None:
        record(spent)
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
