"""The federation designer: design silos, watch HCCT decide (``hcct_lite.federation_designer``).

The logic lives in :mod:`hcct_lite.lessons.designer`; this module draws its picture
(:func:`draw_designer`, testable without widgets) and wires the controls.
"""

from __future__ import annotations

import html

import numpy as np

from ..lessons.designer import MAX_SILOS, PRESETS, ROTATIONS, Designer, Silo, parse_classes
from .plots import plot_dendrogram
from .widgets import STATIC_NOTE, static_widgets

__all__ = ["draw_designer", "draw_training", "federation_designer"]

FIGSIZE = (10.2, 7.6)  # inches: 1020 x 760 pixels at 100 dpi


def draw_designer(picture: dict, chosen: int = 0):
    """Four panels: label mixes, update cosines, HCCT's partition, Theorem 1's terms.

    ``picture`` from :meth:`Designer.picture`. Two rows of two, 10.2 x 7.6 inches: at the
    notebooks' 100 dpi it fits a 1024 x 768 projector. Returns the figure.
    """
    import matplotlib.pyplot as plt

    hist, p = picture["hist"], picture["partition"]
    n = len(hist)
    fig, axs = plt.subplots(2, 2, figsize=FIGSIZE, layout="constrained")
    axs = axs.ravel()
    bottom = np.zeros(n)
    for c in range(hist.shape[1]):  # stacked shares of each digit, one bar per silo
        axs[0].bar(range(1, n + 1), hist[:, c], bottom=bottom, color=plt.cm.tab10(c), label=c)
        bottom += hist[:, c]
    axs[0].set(xlabel="silo", ylabel="share of training labels", title="label mix")
    axs[0].set_xticks(range(1, n + 1))
    axs[0].legend(title="digit", ncols=2, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    image = axs[1].imshow(picture["cosines"], vmin=-1, vmax=1, cmap="RdBu")
    for (r, c), v in np.ndenumerate(picture["cosines"]):
        axs[1].text(c, r, f"{v:.1f}", ha="center", va="center", fontsize=12)
    axs[1].set_xticks(range(n), range(1, n + 1))
    axs[1].set_yticks(range(n), range(1, n + 1))
    axs[1].set_title("update cosines (epoch 1)")
    fig.colorbar(image, ax=axs[1], shrink=0.8)
    labels = [f"{i + 1}: U={u:.2f}" for i, u in enumerate(p.utilities)]
    plot_dendrogram(p, ax=axs[2], labels=labels, hide_virtual=p.n_groups < p.n_clients)
    axs[2].set_title(picture["text"].replace(": ", ":\n", 1))  # the groups on a line of their own
    _draw_terms(axs[3], picture["terms"], chosen)
    return fig


def _draw_terms(ax, terms, chosen):
    x = np.arange(2)
    for k, (sample, divergence) in enumerate((terms["alone"], terms["group"])):
        ax.bar(x[k], sample, color="C0", label="sample term" if k == 0 else None)
        ax.bar(
            x[k],
            divergence,
            bottom=sample,
            color="C1",
            label="label divergence (TV)" if k == 0 else None,
        )
    members = ", ".join(str(i + 1) for i in terms["members"])
    ax.set_xticks(x, ["alone", f"with {members}"])
    ax.set_ylabel("bound terms (L = μ = 1, δ = 0.1)")
    ax.set_title(f"Theorem 1 for client {chosen + 1}")
    ax.legend()


def draw_training(errors: dict):
    """Grouped bars: each silo's final test error under each pattern; returns the figure."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(10, 3.8), layout="constrained")
    n, width = len(next(iter(errors.values()))), 0.8 / len(errors)
    for k, (name, values) in enumerate(errors.items()):
        x = np.arange(1, n + 1) + (k - (len(errors) - 1) / 2) * width
        ax.bar(x, values, width, label=f"{name} (mean {np.mean(values):.1f} %)")
    ax.set(xlabel="silo", ylabel="final test error (%)")
    ax.set_xticks(range(1, n + 1))
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return fig


def _silo_row(k):
    import ipywidgets as w

    return dict(
        samples=w.IntSlider(100, min=0, max=400, step=10, description=f"silo {k}: samples"),
        mix=w.FloatLogSlider(100.0, base=10, min=-1.5, max=2, step=0.1, description="mix"),
        classes=w.Text("0-9", description="classes", layout=w.Layout(width="180px")),
        rotation=w.Dropdown(
            options=list(ROTATIONS), value=0, description="rotation", layout=w.Layout(width="170px")
        ),
    )


def _show(out, fig):
    import matplotlib.pyplot as plt
    from IPython.display import display

    with out:
        out.clear_output(wait=True)
        display(fig)
    plt.close(fig)


def federation_designer(preset: str = "rotated pairs", seed: int = 0):
    """Design a federation of 3-8 silos of digits and watch HCCT decide.

    Controls: a preset (the paper's motivating example, rotated pairs, and notebook 05's
    small clients, IID clients, alpha's scale, label skew), the number of silos, alpha, the
    client whose Theorem 1 terms are shown, and per silo its samples, its label mix
    (Dirichlet concentration ``mix`` over its ``classes``, e.g. ``0-4``) and a rotation.
    The picture: label mixes, first-epoch update cosines, HCCT's partition as a dendrogram
    with each client's utility, Theorem 1's terms. The button trains HCCT's pattern against
    Independent and Global for 5 epochs. A bad setting (0 samples, no class, ...) is named
    in a message and the last valid picture stays. Returns the widget (a VBox); with
    ``HCCT_STATIC_WIDGETS=1`` (the static book) it shows the preset's picture with a note
    and returns None.
    """
    if preset not in PRESETS:
        raise ValueError(f"unknown preset {preset!r}; choose from {list(PRESETS)}")
    designer = Designer(seed)
    if static_widgets():  # the static book: the preset's picture and a note, no controls
        _show_static(designer, preset)
        return None
    return _DesignerPanel(designer, preset).widget()


def _show_static(designer: Designer, preset: str) -> None:
    """Display ``preset``'s picture and say that the controls need a live kernel."""
    import matplotlib.pyplot as plt
    from IPython.display import display

    pic = designer.picture(*PRESETS[preset])
    display(draw_designer(pic))
    plt.close("all")
    print(f"{preset}: {pic['text']}\n{STATIC_NOTE}")


class _DesignerPanel:
    """The designer's controls and outputs, and what each control does when it changes."""

    def __init__(self, designer: Designer, preset: str):
        import ipywidgets as w

        self.designer = designer
        self.rows = [_silo_row(k) for k in range(1, MAX_SILOS + 1)]
        self.boxes = [w.HBox(list(r.values())) for r in self.rows]
        self.top = dict(
            preset=w.Dropdown(options=list(PRESETS), value=preset, description="preset"),
            silos=w.IntSlider(3, min=3, max=MAX_SILOS, description="silos"),
            alpha=w.FloatLogSlider(50.0, base=10, min=-1, max=4, step=0.05, description="alpha"),
            client=w.Dropdown(options=[1, 2, 3], value=1, description="client"),
        )
        self.message, self.partition = w.HTML(), w.HTML()
        self.partition.add_class("hcct-partition")
        self.picture, self.trained = w.Output(), w.Output()
        self.button = w.Button(description="train 5 epochs")
        self.loading = False  # a preset sets many controls: draw once, after the last

    def silos(self) -> list:
        """The silos the visible rows describe."""
        n = self.top["silos"].value
        return [
            Silo(
                r["samples"].value,
                r["mix"].value,
                parse_classes(r["classes"].value),
                r["rotation"].value,
            )
            for r in self.rows[:n]
        ]

    def redraw(self, *_) -> None:
        """Show the rows of the chosen silos and redraw; a bad setting keeps the last picture."""
        if self.loading:
            return
        n, top = self.top["silos"].value, self.top
        for k, box in enumerate(self.boxes):
            box.layout.display = "" if k < n else "none"
        top["client"].options = list(range(1, n + 1))
        try:
            pic = self.designer.picture(self.silos(), top["alpha"].value, top["client"].value - 1)
        except ValueError as err:
            self.message.value = (
                f"<b style='color:#b00020'>{html.escape(str(err))}</b> "
                "(the last valid picture stays)"
            )
            return
        self.message.value = ""
        self.partition.value = html.escape(pic["text"])
        _show(self.picture, draw_designer(pic, top["client"].value - 1))

    def load(self, *_) -> None:
        """Set every control to the chosen preset, then draw once."""
        chosen, alpha = PRESETS[self.top["preset"].value]
        self.loading = True
        self.top["silos"].value, self.top["alpha"].value = len(chosen), alpha
        for r, s in zip(self.rows, chosen, strict=False):
            r["samples"].value, r["mix"].value = s.samples, s.concentration
            r["classes"].value = _classes_text(s.classes)
            r["rotation"].value = s.rotation
        self.loading = False
        self.redraw()

    def train(self, _) -> None:
        """Train HCCT's pattern, Independent and Global for 5 epochs and draw the errors."""
        try:
            errors = self.designer.train(self.silos(), self.top["alpha"].value)
        except ValueError as err:
            self.message.value = f"<b style='color:#b00020'>{html.escape(str(err))}</b>"
            return
        _show(self.trained, draw_training(errors))

    def widget(self):
        """Wire the controls and return the whole designer as one VBox, drawn at its preset."""
        import ipywidgets as w

        top = self.top
        top["preset"].observe(self.load, names="value")
        controls = [top["silos"], top["alpha"], top["client"]]
        for control in controls + [c for r in self.rows for c in r.values()]:
            control.observe(self.redraw, names="value")
        self.button.on_click(self.train)
        box = w.VBox(
            [
                w.HBox([top["preset"], top["silos"]]),
                w.HBox([top["alpha"], top["client"]]),
                *self.boxes,
                self.message,
                self.partition,
                self.picture,
                self.button,
                self.trained,
            ]
        )
        box.add_class("hcct-designer")
        self.load()
        return box


def _classes_text(classes) -> str:
    """(0, 1, 2, 3, 4) -> "0-4"; (0, 2) -> "0,2"."""
    c = sorted(classes)
    if c == list(range(c[0], c[-1] + 1)):
        return f"{c[0]}-{c[-1]}" if len(c) > 1 else str(c[0])
    return ",".join(map(str, c))
