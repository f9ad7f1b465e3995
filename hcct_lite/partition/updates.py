"""Client updates g_i: validation, flattening and their Gram matrix.

Every quantity HCCT's partition needs (cosines between a client and a group's mean update,
norms of group updates) is a ratio of inner products of updates. So the server needs only
the N x N Gram matrix ``G[i, j] = <g_i, g_j>``, computed here once in float64 from any
update format the library accepts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

try:  # torch is a hard dependency of the package, but keep this module importable alone
    import torch
except ImportError:  # pragma: no cover - exercised only without torch
    torch = None

__all__ = [
    "all_zero",
    "gram_matrix",
    "cosine_matrix",
    "validate_sizes",
    "validate_alpha",
    "stack_mapping_updates",
]

# Column block for the float64 Gram of float32 input: bounds the float64 copy to
# N * _BLOCK * 8 bytes while keeping BLAS calls large enough to be efficient.
_BLOCK = 1 << 16


def _is_tensor(x) -> bool:
    return torch is not None and isinstance(x, torch.Tensor)


def _check_2d(shape, n_clients_hint=None) -> None:
    if len(shape) != 2:
        raise ValueError(
            f"updates must be a 2-D array (N clients, M parameters); got shape {tuple(shape)}"
        )
    if shape[0] == 0:
        raise ValueError("updates is empty: at least one client (N >= 1) is required")
    if shape[1] == 0:
        raise ValueError("updates have M = 0 parameters: cosine similarity is undefined")


def _gram_numpy(x: np.ndarray) -> np.ndarray:
    if not np.issubdtype(x.dtype, np.number) or np.iscomplexobj(x):
        raise TypeError(f"updates must hold real numbers; got dtype {x.dtype}")
    # Overflow shows up as a non-finite diagonal, reported by _check_diagonal.
    with np.errstate(over="ignore", invalid="ignore"):
        if x.dtype == np.float64:
            return x @ x.T
        n, m = x.shape
        gram = np.zeros((n, n))
        for start in range(0, m, _BLOCK):
            block = np.asarray(x[:, start : start + _BLOCK], dtype=np.float64)
            gram += block @ block.T
        return gram


def _gram_torch(x) -> np.ndarray:
    if x.is_complex() or not (x.is_floating_point() or x.dtype in _TORCH_INTS):
        raise TypeError(f"updates must hold real numbers; got dtype {x.dtype}")
    x = x.detach()
    if x.device.type == "cpu":
        # numpy's float64 products gave bit-identical Grams at 1 and 2 threads where
        # torch's did not (3.6e-14 apart): the partition adds no thread-count noise
        if x.dtype in (torch.bfloat16, torch.float16):
            x = x.float()  # exact; numpy has no bfloat16
        return _gram_numpy(x.numpy())
    if x.dtype == torch.float64:
        return (x @ x.T).cpu().numpy()
    n, m = x.shape
    gram = torch.zeros((n, n), dtype=torch.float64, device=x.device)
    for start in range(0, m, _BLOCK):
        block = x[:, start : start + _BLOCK].to(torch.float64)
        gram += block @ block.T
    return gram.cpu().numpy()


_TORCH_INTS = (
    () if torch is None else (torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8)
)


def _as_array(value, client: int, key) -> np.ndarray | object:
    if _is_tensor(value):
        return value.detach().reshape(-1)
    arr = np.asarray(value)
    if arr.dtype == object:
        raise TypeError(f"client {client}: entry {key!r} is not numeric")
    return arr.reshape(-1)


def stack_mapping_updates(updates: Sequence[Mapping]) -> dict:
    """Stack per-client mappings ``name -> tensor`` into ``name -> (N, m_name)`` blocks.

    Parameters
    ----------
    updates : sequence of N mappings
        Every mapping must have the same keys, in the same order, with the same shapes.

    Returns
    -------
    dict
        ``name -> (N, m_name)`` numpy arrays or torch tensors, in the first mapping's key order.
    """
    if len(updates) == 0:
        raise ValueError("updates is empty: at least one client (N >= 1) is required")
    keys = list(updates[0].keys())
    if not keys:
        raise ValueError("client 0: update mapping has no entries")
    shapes = {k: tuple(np.shape(updates[0][k])) for k in keys}
    for i, upd in enumerate(updates):
        if not isinstance(upd, Mapping):
            raise TypeError(
                f"client {i}: expected a mapping name -> tensor, got {type(upd).__name__}"
            )
        if list(upd.keys()) != keys:
            raise ValueError(
                f"client {i}: update keys {list(upd.keys())} differ from client 0's {keys}"
            )
        for k in keys:
            if tuple(np.shape(upd[k])) != shapes[k]:
                raise ValueError(
                    f"client {i}: entry {k!r} has shape {tuple(np.shape(upd[k]))}, "
                    f"client 0 has {shapes[k]}"
                )
    flats = [getattr(u, "flat", None) for u in updates]
    if all(_is_tensor(f) for f in flats):  # one vector per client: stack once, slice per entry
        return _blocks_of_flat(torch.stack(flats), keys, shapes)
    blocks = {}
    for k in keys:
        rows = [_as_array(upd[k], i, k) for i, upd in enumerate(updates)]
        blocks[k] = torch.stack(rows) if _is_tensor(rows[0]) else np.stack(rows)
    return blocks


def _blocks_of_flat(stacked, keys, shapes) -> dict:
    """``name -> (N, m_name)`` column slices of ``stacked`` (N, M), the entries in key order.

    The same values as stacking each entry, so the same Gram matrix bit for bit.
    """
    blocks, offset = {}, 0
    for k in keys:
        m = int(np.prod(shapes[k], dtype=np.int64))
        blocks[k] = stacked[:, offset : offset + m]
        offset += m
    if offset != stacked.shape[1]:
        raise ValueError(f"flat updates hold {stacked.shape[1]} values; the entries {offset}")
    return blocks


def _gram_any(x) -> np.ndarray:
    if _is_tensor(x):
        _check_2d(tuple(x.shape))
        return _gram_torch(x)
    x = np.asarray(x)
    _check_2d(x.shape)
    return _gram_numpy(x)


def gram_matrix(updates) -> np.ndarray:
    """Return the float64 Gram matrix ``G[i, j] = <g_i, g_j>`` of the client updates.

    Parameters
    ----------
    updates : array-like or Tensor of shape (n_clients, n_params), or sequence of mappings
        Client updates, or one mapping ``name -> tensor`` per client, flattened in key
        order; the Gram matrix of the concatenation is the sum of the per-entry Gram
        matrices, so nothing is concatenated.

    Returns
    -------
    numpy.ndarray of shape (n_clients, n_clients), float64
        Symmetric. Updates so small or large that their squares under- or overflow
        float64 (1e-200, 1e200) are first scaled by one common power of two: the matrix
        is then that multiple of the Gram matrix, and every cosine is exact.

    Raises
    ------
    ValueError
        If ``updates`` is empty or not 2-D, a client's update holds NaN or Inf or is all
        zeros (its cosine is undefined), or shapes or keys do not match.
    TypeError
        If the updates are not real numbers.

    Examples
    --------
    >>> import numpy as np
    >>> from hcct_lite.partition import gram_matrix
    >>> gram_matrix(np.array([[3.0, 4.0], [1.0, 0.0]]))
    array([[25.,  3.],
           [ 3.,  1.]])
    >>> gram_matrix([{"w": np.array([3.0]), "b": np.array([4.0])},
    ...              {"w": np.array([1.0]), "b": np.array([0.0])}])
    array([[25.,  3.],
           [ 3.,  1.]])
    """
    if isinstance(updates, Sequence) and len(updates) > 0 and isinstance(updates[0], Mapping):
        blocks = stack_mapping_updates(updates)
        gram = sum(_gram_any(b) for b in blocks.values())
        source = blocks
    elif isinstance(updates, Sequence) and len(updates) == 0:
        raise ValueError("updates is empty: at least one client (N >= 1) is required")
    else:
        gram = _gram_any(updates)
        source = {"updates": updates}
    diag = np.diag(gram)
    if not (np.isfinite(diag) & (diag >= _TINY)).all():
        gram = _rescaled(source, gram)
    with np.errstate(over="ignore", invalid="ignore"):
        gram = 0.5 * (gram + gram.T)  # exact symmetry: BLAS may round the two halves differently
    _check_diagonal(gram, source)
    return gram


# Squared norms below this (or overflowing) lose digits in float64: rescale first.
_TINY = np.finfo(np.float64).tiny * 2**60


def _max_abs(block) -> float:
    if _is_tensor(block):
        b = block.detach()
        finite = b[torch.isfinite(b)] if b.is_floating_point() else b
        return float(finite.abs().max()) if finite.numel() else 0.0
    b = np.asarray(block, dtype=np.float64)
    finite = b[np.isfinite(b)]
    return float(np.abs(finite).max()) if finite.size else 0.0


def _rescaled(source: dict, gram: np.ndarray) -> np.ndarray:
    """The Gram matrix of the updates times one power of two, so that none underflows.

    Every update is multiplied by the same exact power of two (2^-e, e the exponent of the
    largest entry), so every cosine, and so the partition, is unchanged; only updates
    whose squares underflow (1e-200) or overflow (1e200) float64 take this path.
    """
    peak = max(_max_abs(b) for b in source.values())
    if peak == 0.0 or not np.isfinite(peak):
        return gram
    scale = 2.0 ** -np.frexp(peak)[1]
    out = 0
    for b in source.values():
        if _is_tensor(b):
            b = b.detach().to(torch.float64).cpu().numpy()
        out = out + _gram_numpy(np.asarray(b, dtype=np.float64) * scale)
    return out


def _check_diagonal(gram: np.ndarray, source: dict) -> None:
    # A NaN/Inf anywhere in g_i makes G[i, i] non-finite, so checking the diagonal is
    # enough and avoids a second pass over the (possibly huge) updates.
    diag = np.diag(gram)
    for i in np.flatnonzero(~np.isfinite(diag)):
        bad = any(_row_has_nonfinite(b, i) for b in source.values())
        what = "contains NaN or Inf" if bad else "is too large: its squared norm overflows float64"
        raise ValueError(f"client {i}: update {what}")
    for i in np.flatnonzero(diag <= 0.0):
        if any(_max_abs(b[i]) > 0.0 for b in source.values()):
            raise ValueError(
                f"client {i}: update is too small next to the others' (its squared norm "
                "underflows float64), so its cosine similarity is undefined"
            )
        raise ValueError(f"client {i}: update is all zeros, so its cosine similarity is undefined")


def _row_has_nonfinite(block, i: int) -> bool:
    if _is_tensor(block):
        return bool((~torch.isfinite(block[i])).any())
    return bool(~np.isfinite(np.asarray(block[i], dtype=np.float64)).all())


def all_zero(update) -> bool:
    """Whether an update (a mapping of tensors or arrays, or a FlatUpdate) is exactly zero.

    Its cosine with anything is undefined, so the partition cannot place it. A dot product
    per tensor decides (one for a FlatUpdate's flat vector); only a zero one, which may be
    an underflow of tiny entries, is confirmed entry by entry.
    """
    flat = getattr(update, "flat", None)
    values = [flat] if _is_tensor(flat) else list(update.values())
    for v in values:
        if _is_tensor(v):
            v = v.detach().reshape(-1)
            if float(v.dot(v)) != 0.0 or bool(v.any()):
                return False
        elif np.any(np.asarray(v)):
            return False
    return True


def validate_sizes(sizes, n_clients: int) -> np.ndarray:
    """Check client data sizes D_i: shape (N,), positive integers. Returns float64 (N,)."""
    if _is_tensor(sizes):
        sizes = sizes.detach().cpu().numpy()
    arr = np.asarray(sizes)
    if arr.ndim != 1 or arr.shape[0] != n_clients:
        raise ValueError(f"sizes must have shape ({n_clients},), one per client; got {arr.shape}")
    if arr.dtype == bool or not np.issubdtype(arr.dtype, np.number):
        raise TypeError(f"sizes must be positive integers; got dtype {arr.dtype}")
    as_float = arr.astype(np.float64)
    for i, d in enumerate(as_float):
        if not np.isfinite(d) or d != np.floor(d):
            raise ValueError(f"client {i}: size {arr[i].item()!r} is not an integer")
        if d <= 0:
            raise ValueError(f"client {i}: size {arr[i].item()!r} must be > 0")
    return as_float


def validate_alpha(alpha, sizes: np.ndarray) -> np.ndarray:
    """Resolve ``alpha`` (float >= 0, (N,) array, or ``"size"``) to per-client float64 (N,)."""
    n = sizes.shape[0]
    if isinstance(alpha, str):
        if alpha != "size":
            raise ValueError(f"alpha must be a number >= 0, an (N,) array or 'size'; got {alpha!r}")
        return sizes.copy()
    if isinstance(alpha, bool) or alpha is None:
        raise TypeError(
            "alpha must be a number >= 0, an (N,) array or 'size'; "
            f"got {'a bool' if alpha is not None else 'None'}"
        )
    if _is_tensor(alpha):
        alpha = alpha.detach().cpu().numpy()
    try:
        arr = np.asarray(alpha, dtype=np.float64)
    except (TypeError, ValueError):
        raise TypeError(
            f"alpha must be a number >= 0, an (N,) array or 'size'; got {type(alpha).__name__}"
        ) from None
    if arr.ndim == 0:
        if not np.isfinite(arr) or arr < 0:
            raise ValueError(f"alpha must be a finite number >= 0; got {float(arr)}")
        return np.full(n, float(arr))
    if arr.shape != (n,):
        raise ValueError(f"alpha array must have shape ({n},), one per client; got {arr.shape}")
    for i, a in enumerate(arr):
        if not np.isfinite(a) or a < 0:
            raise ValueError(f"client {i}: alpha {a} must be a finite number >= 0")
    return arr


def cosine_matrix(updates) -> np.ndarray:
    """Pairwise cosine similarities of client updates.

    Parameters
    ----------
    updates : array-like or Tensor of shape (n_clients, n_params), or sequence of mappings
        Client updates, in any format of :func:`gram_matrix` (which says what raises).

    Returns
    -------
    numpy.ndarray of shape (n_clients, n_clients), float64
        Symmetric, clipped to [-1, 1].

    Examples
    --------
    >>> import numpy as np
    >>> from hcct_lite.partition import cosine_matrix
    >>> cosine_matrix(np.array([[3.0, 4.0], [1.0, 0.0]])).round(6)
    array([[1. , 0.6],
           [0.6, 1. ]])
    """
    gram = gram_matrix(updates)
    norms = np.sqrt(np.diag(gram))
    return np.clip(gram / np.outer(norms, norms), -1.0, 1.0)
