"""Parts of ``docs/reproduction.md``: Table II, why HCCT stays alone on Digit, MAXFL's lead."""

from __future__ import annotations

import numpy as np

from ..runs.results import to_markdown
from .paper import TABLE_II
from .paper_grids import PATTERNS, TABLE1_NAMES
from .report_tables import (
    ablation_summary,
    epoch0_best,
    load_grid,
    table1_rows,
    table2_against_paper,
    variant,
)
from .report_words import alone_epochs, extreme_words, figure_link, source_line
from .verdicts import claim, compare, noise_of, per_seed, schemes_against

__all__ = ["motivating_section", "ablation_section", "left_out", "best_when_joined", "maxfl_lines"]


def _paper_end(values, noise, way) -> str:
    """The paper's lowest or highest pattern of Table II, judged on ours: a bullet's end."""
    means = {k: v["mean"] for k, v in TABLE_II.items()}
    paper = (min if way == "lower" else max)(means, key=means.get)
    grid = {p: g for g, p in TABLE1_NAMES.items()}[paper]
    others = [k for k in values if k != grid]
    comparisons = {k: compare(values[grid], values[k], noise) for k in others}
    verdict = claim(comparisons.values(), way)
    against = [f"`{k}`" for k, c in comparisons.items() if c.outcome not in (way, "not resolved")]
    why = f"; `{grid}` is {'higher' if way == 'lower' else 'lower'} than {' and '.join(against)}"
    return f"The paper's {paper}: **{verdict}**" + (f"{why}." if against else ".")


def _client_means(row) -> list:
    """A row of :func:`table1_rows` without seed counts, client stds and best epoch."""
    if row[1] == "pending":
        return [row[0], *row[1:5], "-"]
    return [row[0].split(" (")[0], *(c.split(" ±")[0] for c in row[1:4]), row[4], row[6]]


def motivating_section(out_dir) -> str:
    """Table II, the motivating example: each pattern's errors, ours beside the paper's."""
    runs = load_grid(out_dir, "motivating")
    header = ["pattern", "client 1", "client 2", "client 3", "mean / std", "paper"]
    epochs = sorted({r["config"]["epochs"] for r in runs}) or ["?"]
    text = [
        "## Table II: the motivating example",
        "",
        f"Three CIFAR-10 clients, {'/'.join(map(str, epochs))} epochs. Clients 1 and 2 hold "
        "20 % and 80 % of five classes, client 3 the other five. In `pair-12`, clients 1 and "
        "2 share a model. `hcct` is HCCT's own choice. Final-epoch errors (%), seed means.",
        "",
        source_line(out_dir, "motivating", runs),
        "",
        to_markdown(header, [_client_means(r) for r in table1_rows(runs)]),
        *figure_link(out_dir, "01_motivating_patterns.png", "Table II: ours beside the paper's"),
    ]
    by = {}
    for r in runs:
        by.setdefault(variant(r), []).append(r)
    paper_patterns = [p for p in TABLE1_NAMES if p in by]
    if set(by) != set(PATTERNS):
        return "\n".join(
            text + ["", "Which pattern is lowest: pending until every pattern has run."]
        )
    values = {p: per_seed(by[p]) for p in paper_patterns}
    noise = noise_of(runs)
    alone, epochs_run = alone_epochs(by["hcct"])
    text += [
        "",
        f"- Lowest: {extreme_words(values, noise, 'lower', '`{}`'.format)}. "
        + _paper_end(values, noise, "lower"),
        f"- Highest: {extreme_words(values, noise, 'higher', '`{}`'.format)}. "
        + _paper_end(values, noise, "higher"),
        f"- `hcct` keeps every client alone in {alone} of {epochs_run} epochs"
        + (": independent training." if alone == epochs_run else "."),
        f"- Our errors are {table2_against_paper(runs)}. Our CIFAR-10 is the offline subset "
        "(Table III).",
    ]
    return "\n".join(text)


def ablation_section(out_dir) -> str:
    """Why HCCT stays alone on Digit: epoch 1's update cosines with and without buffers."""
    runs = load_grid(out_dir, "ablation-digit")
    text = ["### Digit: update cosines with and without batch-norm buffers", ""]
    if not runs:
        return "\n".join(text + ["pending"])
    by = {}  # label -> [(same, other, groups, final)] over seeds
    for name, a in ablation_summary(runs).items():
        row = (a["same"], a["other"], a["groups"], a["final"])
        by.setdefault(name.rsplit("-seed", 1)[0], []).append(row)
    rows = [
        [label, f"{s:.3f}", f"{o:.3f}", g, f"{f:.2f}"]
        for label, (s, o, g, f) in ((k, _seed_means(v)) for k, v in sorted(by.items()))
    ]
    header = ["update over", "cosine, same domain", "cosine, other domains", "groups", "error"]
    text += [
        "Epoch 1's update cosines of HCCT on Digit, mean over client pairs and seeds. "
        "`parameters` is the paper's update; `buffers` adds batch-norm statistics, as the "
        "authors' code does.",
        "",
        source_line(out_dir, "ablation-digit", runs),
        "",
        to_markdown(header, rows),
    ]
    if {"buffers", "parameters"} <= set(by):
        (bs, bo, *_), (ps, po, *_) = (
            [round(x, 3) for x in _seed_means(by[k])[:2]] for k in ("buffers", "parameters")
        )
        text += [
            "",
            f"Buffers shrink the gap between cosines within and across domains from "
            f"{ps - po:.3f} to {bs - bo:.3f}.",
        ]
        if bs - bo < ps - po:
            text[-1] += (
                " So groups found with buffers are no evidence that gradient similarity finds "
                "collaborators."
            )
    return "\n".join(text)


def _seed_means(rows) -> tuple:
    """Mean cosines and error over seeds, and the groups at the end (a range if seeds differ)."""
    groups = sorted({g for _, _, g, _ in rows})
    span = str(groups[0]) if len(groups) == 1 else f"{groups[0]}-{groups[-1]}"
    return (
        float(np.mean([r[0] for r in rows])),
        float(np.mean([r[1] for r in rows])),
        span,
        float(np.mean([r[3] for r in rows])),
    )


def left_out(run) -> list:
    """MAXFL: ``[(epoch, clients)]`` of the epochs from 1 whose global model left clients out.

    A left-out client answered (it is in the epoch's groups) but is not among its
    ``participants``: it trained its own model alone, as under Independent.
    """
    out = []
    for t, h in enumerate(run["history"]):
        trained = {i for g in h["groups"] for i in g}
        alone = sorted(trained - set(h.get("participants", [])))
        if t > 0 and alone:
            out.append((t, alone))
    return out


def best_when_joined(run) -> float:
    """MAXFL's best-epoch mean error over only the epochs each client trained the global model.

    Epoch 0 (every client alone) and the epochs a client was left out are not chosen from. A
    client that never joined is left out of the mean.
    """
    best = []
    for i in range(len(run["history"][-1]["client_test_error"])):
        joined = [
            h["client_test_error"][i]
            for t, h in enumerate(run["history"])
            if t > 0 and i in h.get("participants", []) and h["client_test_error"][i] is not None
        ]
        if joined:
            best.append(min(joined))
    return float(np.mean(best))


def maxfl_lines(runs) -> list:
    """MAXFL's best-epoch lead over Global, where it leaves clients out, explained.

    No line unless MAXFL is lower than Global by the rule and some MAXFL run left a client
    out. The lead splits exactly into epoch 0, the epochs a client trained alone, and the
    rest: :func:`best_when_joined` against Global's best-epoch mean, judged by the rule.
    """
    maxfl = [r for r in runs if r["scheme"] == "maxfl"]
    out = {r["seed"]: len(left_out(r)) for r in maxfl if left_out(r)}
    if not out or not any(r["scheme"] == "global" for r in runs):
        return []
    lead = schemes_against(runs, "maxfl", "global")
    if lead.outcome != "lower":
        return []
    best = per_seed([r for r in runs if r["scheme"] == "global"], _best_mean)
    rest = compare(per_seed(maxfl, best_when_joined), best, noise_of(runs))
    mine = float(np.mean([_best_mean(r) for r in maxfl]))
    at0 = epoch0_best(maxfl).get("maxfl", (0, 0, mine, mine))[3] - mine
    low, high = min(out.values()), max(out.values())
    span = f"{low}" if low == high else f"{low} to {high}"
    return [
        f"- MAXFL against Global: lower ({lead.words()}). Yet it left a client out, to train "
        f"alone, in {span} epoch{'s' * (high > 1)} at {len(out)} of {len(maxfl)} seeds.",
        f"- Epoch 0 gives {at0:.2f} points of the lead, those epochs "
        f"{lead.gain - rest.gain - at0:.2f}. Choosing each client's best from its epochs in the "
        f"global model leaves {rest.gain:.2f}: {rest.outcome} ({rest.words()}).",
    ]


def _best_mean(r) -> float:
    return r["final"]["best_over_epochs"]["mean"]
