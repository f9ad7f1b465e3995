"""The report's section on CPU kernels: how much of a shipped result the SIMD kernels decide.

Read from ``results/kernel-stability-<capability>.json``, which ``hcct-lite verify
RESULT... --capability <capability> --json ...`` writes: each shipped HCCT run rerun under
kernels other than those it recorded.
"""

from __future__ import annotations

import glob
import json
import os

import numpy as np

from ..runs.results import to_markdown

__all__ = ["kernel_section", "kernel_rows"]

HEADER = [
    "run",
    "kernels: recorded → rerun",
    "epochs with identical groups",
    "mean adjusted Rand",
    "first differing epoch",
    "mean error change (points)",
]


def _load(out_dir: str) -> list:
    reports = []
    for path in sorted(glob.glob(os.path.join(out_dir, "kernel-stability-*.json"))):
        with open(path) as f:
            reports += json.load(f)
    return reports


def _name(path: str) -> str:
    grid, run = path.replace(os.sep, "/").split("/")[-2:]
    return f"{grid}/{run.removesuffix('.json')}"


def kernel_rows(reports) -> list:
    """One table row per rerun (see :data:`HEADER`)."""
    return [
        [
            _name(r["path"]),
            f"{r['recorded_capability']} → {r['capability']}",
            f"{100 * r['same_groups_share']:.0f}%",
            f"{r['mean_adjusted_rand']:.3f}",
            "-" if r["first_group_difference"] is None else str(r["first_group_difference"]),
            f"{r['mean_error_change']:+.2f}",
        ]
        for r in reports
    ]


def _lead(out_dir: str, grid: str) -> str:
    """HCCT's final-epoch lead over Independent on ``grid``, against the kernels' noise."""
    from ..runs.reading import by_scheme, load_grid

    stats = by_scheme(load_grid(out_dir, grid))
    if "hcct" not in stats or "independent" not in stats:
        return ""
    lead = stats["independent"][0][0] - stats["hcct"][0][0]
    return f" (HCCT's lead over Independent there: {lead:.2f} points, final epoch)"


def _summary(reports, out_dir: str) -> str:
    parts = []
    for grid in sorted({_name(r["path"]).split("/")[0] for r in reports}):
        rs = [r for r in reports if _name(r["path"]).startswith(grid + "/")]
        change = [abs(r["mean_error_change"]) for r in rs]
        parts.append(
            f"{grid}: {sum(r['reproduces'] for r in rs)} of {len(rs)} reruns reproduce; "
            f"groups identical in {100 * np.mean([r['same_groups_share'] for r in rs]):.0f}% "
            f"of epochs on average (adjusted Rand "
            f"{np.mean([r['mean_adjusted_rand'] for r in rs]):.3f}); the mean final error "
            f"moves by {np.mean(change):.2f} points on average, {max(change):.2f} at most"
            + _lead(out_dir, grid)
        )
    return "; ".join(parts)


def kernel_section(out_dir: str) -> str:
    """The markdown section, or a line saying the measurement is not shipped."""
    text = [
        "## Reproducible on any CPU: how much the kernels decide",
        "",
        "torch, MKL and oneDNN pick their SIMD kernels per CPU, and floats summed in "
        "another order differ in their last bits. Every result records the kernels and "
        "torch threads it ran with; the shipped CPU grids ran with the portable `default` "
        "kernels (`--cpu-capability default`: the same code path on every x86-64 CPU) and "
        "one thread, and `hcct-lite verify RESULT.json` reruns one under them (exit 0: "
        "same groups every epoch, each client's final error within one test sample).",
        "",
    ]
    reports = _load(out_dir)
    if not reports:
        return "\n".join(text + ["The rerun under other kernels is pending."])
    text += [
        "Below, shipped HCCT runs rerun under this machine's faster kernels instead: the "
        "decisions change where a merge's benefit sits within float noise of 0, so the "
        "question is whether the conclusions do.",
        "",
        to_markdown(HEADER, kernel_rows(reports)),
        "",
        _summary(reports, out_dir) + ". The decisions are float-noise sensitive on "
        "FMNIST's IID clients, where many merges sit near a benefit of 0; the conclusions "
        "are not.",
    ]
    return "\n".join(text)
