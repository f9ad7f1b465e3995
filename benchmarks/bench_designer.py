"""Time the federation designer's redraws and its training button (goal: 5 s and 30 s).

Each row is one action on a warm :class:`~hcct_lite.lessons.designer.Designer`, timed
from the new settings to the rendered PNG (what the widget's redraw does), one
torch thread as in a notebook. The first row includes building the digits and the model.

    python benchmarks/bench_designer.py
"""

from __future__ import annotations

import dataclasses
import io
import os
import platform
import time

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import torch  # noqa: E402

from hcct_lite.lessons.designer import PRESETS, Designer  # noqa: E402
from hcct_lite.viz.designer import draw_designer, draw_training  # noqa: E402


def timed(action):
    start = time.perf_counter()
    action()
    plt.gcf().savefig(io.BytesIO(), format="png")  # rendered, as the widget displays it
    plt.close("all")
    return time.perf_counter() - start


def main():
    torch.set_num_threads(1)
    silos, alpha = PRESETS["rotated pairs"]
    d = {}

    def first():
        d["designer"] = Designer(seed=0)
        draw_designer(d["designer"].picture(silos, alpha))

    moved = [dataclasses.replace(silos[0], samples=300)] + list(silos[1:])
    rows = [
        ("first picture (8 silos, data and model built)", timed(first)),
        ("move alpha", timed(lambda: draw_designer(d["designer"].picture(silos, 5.0)))),
        (
            "move one silo's samples",
            timed(lambda: draw_designer(d["designer"].picture(moved, 5.0))),
        ),
    ]
    for name, (preset, a) in PRESETS.items():
        (
            rows.append(
                (
                    f"preset '{name}'",
                    timed(lambda p=preset, a=a: draw_designer(d["designer"].picture(p, a))),
                )
            ),
        )
    (
        rows.append(
            (
                "train button (3 patterns x 5 epochs, 8 silos)",
                timed(lambda: draw_training(d["designer"].train(silos, alpha))),
            )
        ),
    )
    print(f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, 1 torch thread")
    print(f"{'action':<50} {'seconds':>8}")
    for name, seconds in rows:
        print(f"{name:<50} {seconds:8.2f}")


if __name__ == "__main__":
    main()
