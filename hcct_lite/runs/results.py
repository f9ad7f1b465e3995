"""Result files and the paper's tables.

Table IV (mean ± std over seeds) and Table V (mean, std, min, max over clients).
"""

from __future__ import annotations

import csv
import io
import json
import os

import numpy as np

from .files import write_text

__all__ = [
    "save_tables",
    "write_json",
    "table3",
    "table4",
    "to_markdown",
    "to_csv",
    "format_pm",
    "pm",
    "seed_stats",
]


def write_json(path: str, obj) -> None:
    """Write ``obj`` as JSON atomically: a killed run never leaves a half-written file.

    Never replaces anything but a regular file (a device or a FIFO stays what it is), and
    never writes through a link or into a folder another user can steer
    (:func:`~hcct_lite.runs.files.write_text`).
    """
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    write_text(path, json.dumps(obj, indent=1))


def _by(results, *keys):
    groups = {}
    for r in results:
        groups.setdefault(tuple(r[k] for k in keys), []).append(r)
    return groups


def table3(results, protocol: str = "final") -> dict:
    """``{(task, scheme): (mean, std, n_seeds)}`` of the mean test error over seeds.

    ``protocol="final"``: the last epoch (ours); ``"best"``: each client's best epoch,
    selected on its test split (what the authors' code reports, the paper's protocol).
    """
    if protocol not in ("final", "best"):
        raise ValueError(f"protocol must be 'final' or 'best'; got {protocol!r}")

    def mean_of(r):
        f = r["final"]
        return f["mean"] if protocol == "final" else f["best_over_epochs"]["mean"]

    return {
        k: seed_stats([mean_of(r) for r in rs]) for k, rs in _by(results, "task", "scheme").items()
    }


def seed_stats(values) -> tuple:
    """``(mean, std, n)`` of ``values`` (one number per seed)."""
    v = np.asarray(values, dtype=np.float64)
    return float(v.mean()), float(v.std()), len(v)


def table4(results) -> dict:
    """``{(task, scheme): (mean, std, min, max)}`` over clients, averaged over seeds."""
    out = {}
    for k, rs in _by(results, "task", "scheme").items():
        stats = np.array([[r["final"][s] for s in ("mean", "std", "min", "max")] for r in rs])
        out[k] = tuple(float(x) for x in stats.mean(axis=0))
    return out


def pm(mean, std, n=None) -> str:
    """``"mean ± std"``, with ``" (n)"`` seeds when ``n`` is given."""
    return f"{mean:.2f} ± {std:.2f}" + ("" if n is None else f" ({n})")


def format_pm(pair) -> str:
    """``(mean, std, ...)`` as ``"mean ± std"``; ``"-"`` when missing."""
    return "-" if pair is None else pm(pair[0], pair[1])


def _rows3(t3, schemes, tasks):
    rows = [[s] + [format_pm(t3.get((t, s))) for t in tasks] for s in schemes]
    return ["scheme"] + tasks, rows


def _rows4(t4, schemes, task):
    header = ["scheme", "mean", "std", "min", "max"]
    rows = [[s] + [f"{x:.2f}" for x in t4[(task, s)]] for s in schemes if (task, s) in t4]
    return header, rows


def to_markdown(header, rows) -> str:
    """A markdown table."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(map(str, r)) + " |" for r in rows]
    return "\n".join(lines)


def to_text(header, rows) -> str:
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows, strict=True)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    return "\n".join(
        [fmt.format(*header), fmt.format(*["-" * w for w in widths])]
        + [fmt.format(*r) for r in rows]
    )


def to_csv(header, rows) -> str:
    """CSV text of a table."""
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows([header, *rows])
    return buf.getvalue()


def tables(results, schemes, tasks):
    """The two tables as (header, rows): Table IV over tasks, Table V for each task."""
    t3 = _rows3(table3(results), schemes, tasks)
    t4 = {t: _rows4(table4(results), schemes, t) for t in tasks}
    return t3, t4


def save_tables(results, schemes, tasks, out_dir, stem="tables") -> str:
    """Print-ready text of Table IV and Table V; also saved as ``<stem>.md`` and CSVs."""
    (h3, r3), t4 = tables(results, schemes, tasks)
    md = [
        "## Table IV: mean test error (%) over clients, mean ± std over seeds",
        "",
        to_markdown(h3, r3),
    ]
    text = [
        "Table IV layout: mean test error (%) over clients, mean ± std over seeds",
        to_text(h3, r3),
    ]
    os.makedirs(out_dir, exist_ok=True)
    write_text(os.path.join(out_dir, f"{stem}_schemes.csv"), to_csv(h3, r3))
    for t, (h4, r4) in t4.items():
        md += [
            "",
            f"## Table V ({t}): test error (%) over clients, averaged over seeds",
            "",
            to_markdown(h4, r4),
        ]
        text += [
            "",
            f"Table V layout ({t}): test error (%) over clients, averaged over seeds",
            to_text(h4, r4),
        ]
        write_text(os.path.join(out_dir, f"{stem}_per_client_{t}.csv"), to_csv(h4, r4))
    write_text(os.path.join(out_dir, f"{stem}.md"), "\n".join(md) + "\n")
    return "\n".join(text)
