"""``docs/reproduction.md``: each table and figure of the paper beside ours, with a verdict.

Every number and verdict is computed from the result files, the verdicts by the rule of
:mod:`.verdicts`.
"""

from __future__ import annotations

import os

import numpy as np

from ..runs.results import to_markdown
from ..training.config import SCHEMES
from .paper import TABLE_III, TABLE_IV, TABLE_V
from .report_figures import figure_sections
from .report_sections import ablation_section, maxfl_lines, motivating_section
from .report_tables import (
    against_paper,
    by_scheme,
    epoch0_best,
    load_grid,
    per_client_rows,
    pm,
    setup_beside_paper,
)
from .report_words import alone_epochs, figure_link, source_line
from .verdicts import RULE, claim, paper_order, schemes_against, worst_client_claim

TASK_GRIDS = {"digit": "schemes-digit", "fmnist": "schemes-fmnist", "cifar10": "schemes-cifar10"}
TASK_NAMES = {"digit": "Digit", "fmnist": "FMNIST", "cifar10": "CIFAR-10"}


def _table4(out_dir, tasks) -> str:
    """Table IV in the paper's layout: per task, the paper's mean, our final and best epoch."""
    header, rows = ["scheme"], {s: [s] for s in SCHEMES}
    for task in tasks:
        header += [f"{TASK_NAMES[task]}: paper", "final", "best ± std"]
        stats = by_scheme(load_grid(out_dir, TASK_GRIDS[task]))
        for s in SCHEMES:
            paper = TABLE_IV.get(s, {}).get(task)
            rows[s].append(f"{paper[0]:.2f}" if paper else "-")
            if s in stats:
                rows[s] += [f"{stats[s][0][0]:.2f}", pm(*stats[s][1][:2])]
            else:
                rows[s] += ["pending"] * 2
    return to_markdown(header, list(rows.values()))


INTRO = """# Reproducing the paper

Each table and figure of the paper beside ours, with a verdict. `hcct-lite reproduce`
generates this page from `results/`: do not edit it by hand."""


def _reading_section(out_dir) -> str:
    """How to read the verdicts: the two protocols, the rule, and the defences the runs used."""
    lines = [
        "## How to read the verdicts",
        "",
        "- *Final epoch*: each client's test error after the last epoch; nothing is chosen "
        "on test data.",
        "- *Best epoch*: each client's lowest test error over the epochs, chosen on its test "
        "split as the authors' code does. Compare it with the paper.",
        *(f"- {sentence}" for sentence in RULE),
        f"- {_defences(out_dir)}",
    ]
    return "\n".join(lines)


def _defences(out_dir) -> str:
    """The paper's algorithm has no defence: which shipped runs used one, and what it did."""
    from .paper_grids import GRIDS

    runs = [r for g in GRIDS for r in load_grid(out_dir, g)]
    ruled = [r for r in runs if r["config"].get("norm_limit")]
    other = [r for r in runs if r["config"].get("aggregator", "mean") != "mean"]
    refused = sum(len(r.get("rejected") or []) for r in ruled)
    said = "The paper's algorithm averages every reply."
    if ruled:
        limits = "/".join(f"{x:g}" for x in sorted({r["config"]["norm_limit"] for r in ruled}))
        said += f" {len(ruled)} of {len(runs)} runs ran under the norm rule (limit {limits})"
        said += (
            ", which refused no reply: they computed what the paper's does."
            if refused == 0
            else f", which refused {refused} replies: those runs are not the paper's algorithm."
        )
    if other:
        said += f" {len(other)} runs used a robust aggregator."
    return said


def _setup_section(out_dir) -> str:
    runs = {t: load_grid(out_dir, g) for t, g in TASK_GRIDS.items()}
    runs = {t: rs for t, rs in runs.items() if rs}
    text = ["## Table III: the setup", ""]
    if not runs:
        return "\n".join(text + ["pending"])
    header, rows, differences = setup_beside_paper(runs)
    text += [
        "Our Table IV runs' settings; the paper's are in brackets where they differ.",
        "",
        to_markdown(header, rows),
        "",
    ]
    notes = []
    for task, label, ours, paper in differences:
        name = TASK_NAMES.get(task, task)
        if label == "domains":
            missing = [d for d in paper.split(", ") if d not in ours.split(", ")]
            notes.append(f"{name} lacks {' and '.join(missing)}: they cannot be read offline.")
        elif label.startswith("training samples"):
            fewer = float(ours) < float(paper)
            notes.append(
                f"{name} clients hold {'fewer' if fewer else 'more'} samples"
                + (": the offline copy is a subset." if fewer else ".")
            )
        else:
            notes.append(f"{name}'s {label} is {ours}, not {paper}.")
    notes.append("A test checks every shipped file against these settings.")
    return "\n".join(text + [" ".join(notes)])


def _scheme_verdicts(runs, task) -> list:
    """HCCT against Independent and Global by the rule (best epoch), beside the paper's gap."""
    lines = []
    for other in ("independent", "global"):
        c = schemes_against(runs, "hcct", other)
        lines.append(f"- HCCT against {other.capitalize()}: {c.outcome} ({c.words()}).")
    order = paper_order(runs, task).strip()
    if order:
        lines.append(f"- {order}")
    return lines


def _epoch0_note(runs) -> list:
    """Where a client's best epoch is epoch 0, before any aggregation (none: no line)."""
    at0 = epoch0_best(runs)
    return [
        f"- {s}: {k} of {n} client-runs are best at epoch 0, before any aggregation "
        f"({w:.2f} without it)."
        for s, (k, n, b, w) in at0.items()
    ]


def _fmnist(out_dir, runs) -> list:
    lines = [f"- Our errors are {against_paper(runs, 'fmnist')}."]
    ours = by_scheme(runs)
    models = {}
    for r in load_grid(out_dir, "fmnist-network"):
        models.setdefault(r["config"]["model"], []).append(r)
    schemes = [s for s in ("independent", "global", "hcct") if s in ours]
    authors = [r for r in models.get("fmnist_mlp_authors", []) if r["scheme"] in schemes]
    if not authors:
        return lines + ["- The runs of the authors' network are pending."]
    theirs = by_scheme(authors)
    up = [theirs[s][1][0] - ours[s][1][0] for s in schemes if s in theirs]
    return lines + [
        "- The authors' network softmaxes twice, which shrinks the gradients. With it "
        f"(`fmnist-network`), our errors rise {min(up):.2f} to {max(up):.2f} points, to "
        f"{against_paper(authors, 'fmnist')}.",
    ]


def _digit(out_dir, runs) -> list:
    both = claim([schemes_against(runs, "global", s) for s in ("hcct", "independent")])
    hcct = [r for r in runs if r["scheme"] == "hcct"]
    alone, epochs = alone_epochs(hcct)
    alpha = "/".join(f"{a:g}" for a in sorted({r["config"]["alpha"] for r in hcct}))
    disagree = "does not hold" in paper_order(runs, "digit")
    return [
        f"- Global below both HCCT and Independent: **{both}**.",
        ("- So we disagree with the paper: at" if disagree else "- At")
        + f" α = {alpha}, HCCT keeps every client alone in {alone} of {epochs} epochs. The "
        "cosines say why:",
    ]


def _cifar(out_dir, runs) -> list:
    ours = np.mean([np.mean(r["sizes"]) for r in runs])
    paper = float(TABLE_III["cifar10"]["training samples per client (mean)"])
    return [
        f"- Our errors are {against_paper(runs, 'cifar10')}. Our clients hold {ours:.0f} "
        f"training samples, not {paper:.0f}.",
    ]


TASK_NOTES = (("digit", _digit), ("fmnist", _fmnist), ("cifar10", _cifar))


def _table4_sections(out_dir) -> list:
    grids = [TASK_GRIDS[t] for t, _ in TASK_NOTES]
    sources = source_line(out_dir, grids, {g: load_grid(out_dir, g) for g in grids})
    parts = [
        "\n".join(
            [
                "## Table IV: mean test error (%) over clients",
                "",
                "The paper's mean, then ours at the final and the best epoch. Verdicts use the "
                "best epoch.",
                "",
                sources,
                "",
                _table4(out_dir, [t for t, _ in TASK_NOTES]),
                *figure_link(out_dir, "04_scheme_comparison.png", "Table IV, ours"),
            ]
        )
    ]
    for task, note in TASK_NOTES:
        runs = load_grid(out_dir, TASK_GRIDS[task])
        text = [f"### {TASK_NAMES[task]}", ""]
        if not by_scheme(runs):
            text.append("pending")
        else:
            text += [*_scheme_verdicts(runs, task), *note(out_dir, runs), *_epoch0_note(runs)]
            text += maxfl_lines(runs)
        parts.append("\n".join(text))
        if task == "digit":
            parts.append(ablation_section(out_dir))
    return parts


def _table5_section(out_dir) -> str:
    runs = load_grid(out_dir, "schemes-digit")
    rows = per_client_rows(runs)
    text = ["## Table V: Digit, test error over clients", ""]
    if not rows:
        return "\n".join(text + ["pending"])
    worst = {
        s: float(np.mean([r["final"]["max"] for r in runs if r["scheme"] == s]))
        for s in ("hcct", "independent")
        if any(r["scheme"] == s for r in runs)
    }
    text += [
        "Mean / std / min / max over the clients at the final epoch, seed means.",
        "",
        to_markdown(["scheme", "ours", "paper"], [[r[0], r[1], r[3]] for r in rows]),
        "",
        f"- The paper: HCCT lowers the worst client's error, {TABLE_V['hcct'][3]:.2f} against "
        f"Independent's {TABLE_V['independent'][3]:.2f}.",
    ]
    if len(worst) == 2:
        text.append(
            f"- Ours: {worst['hcct']:.2f} against {worst['independent']:.2f}. "
            + worst_client_claim(runs)
        )
    return "\n".join(text)


def render(out_dir: str) -> str:
    """The whole report's markdown from the results in ``out_dir``."""
    parts = [INTRO, _reading_section(out_dir), motivating_section(out_dir)]
    parts += [_setup_section(out_dir), *_table4_sections(out_dir), _table5_section(out_dir)]
    parts += figure_sections(out_dir)
    return "\n\n".join(parts) + "\n"


def write_report(out_dir: str = "results", path: str = "docs/reproduction.md") -> str:
    """Regenerate the report from ``out_dir``; returns its text."""
    text = render(out_dir)
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    with open(path, "w") as f:
        f.write(text)
    return text


def render_report(out_dir: str = "results") -> str:
    """The report's markdown, without writing it."""
    return render(out_dir)
