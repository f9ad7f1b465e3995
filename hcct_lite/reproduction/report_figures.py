"""The report's sections for the paper's Figs. 3-6.

Each says what the figure claims, prints our numbers and judges the claim by the rule of
:mod:`.verdicts`, over the seeds every variant has.
"""

from __future__ import annotations

import re

import numpy as np

from ..runs.reading import complete_seeds, load_grid
from ..runs.results import to_markdown
from .figure_checks import (
    alpha_ratio_stats,
    fig4_incumbents,
    final_against_lowest,
    final_utility,
    fixed_k_summary,
    limited_k_margins,
    planned_ks,
)
from .paper import FIGURES, TABLE_III
from .paper_grids import FIG5_RATIOS
from .report_tables import pm
from .report_words import alone_epochs, figure_link, source_line
from .verdicts import (
    alpha_against,
    arrival_steps,
    claim,
    extreme,
    k_against,
    noise_of,
    per_seed,
)

__all__ = ["fig4_table", "fig5_table", "figure_sections"]


def _heading(out_dir, title, grid, runs) -> list:
    said = FIGURES[grid].split(": ", 1)[-1]  # without its "Fig. n: "
    return [f"## {title}", "", f"Paper: {said}", "", source_line(out_dir, grid, runs)]


def _alpha(runs) -> str:
    return "/".join(f"{a:g}" for a in sorted({r["config"]["alpha"] for r in runs}))


def fig4_table(runs) -> tuple:
    """Fig. 3's curves: one row per arrival rate, and the checkpoints (epochs) of its columns.

    Parameters
    ----------
    runs : list of result dicts of the ``incoming-cifar10`` grid

    Returns
    -------
    rows : list of [label, error at each checkpoint..., final error of the initial clients,
        groups / clients at the end]; errors are seed means of the mean over the clients
        present at that epoch
    checkpoints : list of int, the epochs (1-based) of the error columns
    """
    by = {}
    for r in runs:
        by.setdefault(r["config"]["new_clients"], []).append(r)
    if not by:
        return [], []
    first = runs[0]["config"]
    every, epochs = first["join_every"], len(runs[0]["history"])
    checkpoints = list(range(every, epochs + 1, every))
    if checkpoints[-1] != epochs:
        checkpoints.append(epochs)
    incumbents = fig4_incumbents(runs)  # the first clients: did newcomers help or hurt?
    rows = []
    for n, rs in sorted(by.items()):
        curve = np.mean([[h["mean_test_error"] for h in r["history"]] for r in rs], axis=0)
        groups = np.mean([len(r["history"][-1]["groups"]) for r in rs])
        clients = np.mean([len(r["history"][-1]["client_test_error"]) for r in rs])
        rows.append(
            [f"{n} new per {every} epochs"]
            + [f"{curve[t - 1]:.2f}" for t in checkpoints]
            + [f"{incumbents[n]:.2f}", f"{groups:.1f} / {clients:.0f}"]
        )
    return rows, checkpoints


def _fig4_section(out_dir) -> str:
    runs = complete_seeds(load_grid(out_dir, "incoming-cifar10"))
    text = _heading(out_dir, "Fig. 3: clients arriving during training", "incoming-cifar10", runs)
    rows, checkpoints = fig4_table(runs)
    if not rows:
        return "\n".join(text + ["", "pending"])
    initial = runs[0]["config"]["initial_clients"]
    header = [
        "arrivals",
        f"epoch {checkpoints[-1]}",
        f"first {initial} clients",
        "groups / clients",
    ]
    rows = [[r[0], r[-3], r[-2], r[-1]] for r in rows]  # the curves are in the figure
    steps = arrival_steps(runs)
    alone, epochs = alone_epochs(runs)
    text += [
        "",
        "Mean test error (%) at the final epoch: over every client, over the first ones; "
        "seed means.",
        "",
        to_markdown(header, rows),
        *figure_link(out_dir, "04_incoming_clients.png", "Fig. 3, ours"),
        "",
        f"- More arrivals end lower: **{claim([c for *_, c in steps])}**.",
        *(f"- {n} against {m} new per period: {c.outcome} ({c.words()})." for m, n, c in steps),
        f"- At α = {_alpha(runs)}, HCCT keeps every client alone in {alone} of {epochs} epochs"
        + (", so newcomers almost never join a group." if alone >= 0.9 * epochs else "."),
    ]
    return "\n".join(text)


def fig5_table(runs) -> tuple:
    """Fig. 4: one row per α, one column per train ratio, cells "final (best epoch)".

    Returns
    -------
    rows : list of [alpha, cell per ratio...]; a cell is "pending" where no run is shipped
    best : dict ratio -> (alpha with the lowest final error, with the lowest best-epoch error)
    """
    stats = alpha_ratio_stats(runs)
    alphas = sorted({a for _, a in stats})
    rows = [
        [f"{a:g}"]
        + [
            f"{pm(*stats[(r, a)][:2])} ({stats[(r, a)][2]:.2f})" if (r, a) in stats else "pending"
            for r in FIG5_RATIOS
        ]
        for a in alphas
    ]
    best = {}
    for ratio in FIG5_RATIOS:
        cells = {a: v for (r, a), v in stats.items() if r == ratio}
        if cells:
            best[ratio] = tuple(min(cells, key=lambda a: cells[a][i]) for i in (0, 2))
    return rows, best


def _ratio_words(ratios) -> str:
    return ", ".join(f"{r:g}" for r in ratios)


def _by_verdict(verdicts: dict) -> str:
    """``{ratio: verdict}`` as ``"does not hold at train ratio 0.05; holds at 0.1"``."""
    by = {}
    for r, v in verdicts.items():
        by.setdefault(v, []).append(r)
    return "; ".join(f"**{v}** at {_ratio_words(rs)}" for v, rs in by.items())


def _fig5_verdict(runs, best) -> list:
    """Fig. 4's claims on our runs by the rule: best epoch (the paper's protocol), then final."""
    stats = alpha_ratio_stats(runs)
    ratios = sorted(best)
    small = sorted({a for _, a in stats if a <= 100})
    apart, pairs = 0, 0
    for r in ratios:  # every pair of small alphas at ratio r, by the rule
        for i, a in enumerate(small):
            for b, c in alpha_against(runs, r, a).items():
                if b in small[i + 1 :]:
                    pairs += 1
                    apart += c.outcome != "not resolved"
    little = {r: claim(alpha_against(runs, r, 100.0).values()) for r in ratios if r <= 0.1}
    more = {}
    for r in (r for r in ratios if r >= 0.2):  # alpha = 100 against the best alpha below it
        below = min((v[2], a) for (q, a), v in stats.items() if q == r and a < 100)[1]
        more[r] = claim([alpha_against(runs, r, 100.0)[below]], "higher")
    lines = ["Best epoch (the paper's protocol), by the rule, per train ratio:", ""]
    if little:
        lines.append(f"- α = 100 lowest with little data: {_by_verdict(little)}.")
    if more:
        lines.append(f"- A smaller α lowest with more data: {_by_verdict(more)}.")
    lines.append(
        f"- Small α matter little: {apart} of {pairs} pairs of α ≤ {small[-1]:g} at one "
        "ratio are resolved apart."
    )
    big = max(a for _, a in stats)
    worst = {r: alpha_against(runs, r, big)[best[r][1]] for r in ratios if best[r][1] != big}
    if big > 100 and worst:
        by = {}
        for r, c in worst.items():
            by.setdefault(c.outcome, []).append(f"{r:g}")
        lines.append(
            f"- α = {big:g} against the lowest α: "
            + "; ".join(f"{o} at {', '.join(rs)}" for o, rs in by.items())
            + "."
        )
    lines += ["", "Final epoch, by the rule:", ""]
    higher, ends = [], {}
    for r in ratios:
        top, against = final_against_lowest(runs, r)
        tied = [a for a, c in against.items() if c.outcome != "higher"]
        names = sorted([top, *tied])
        said = " and ".join([", ".join(f"{a:g}" for a in names[:-1]), f"{names[-1]:g}"])
        ends.setdefault(f"a tie of {said}" if tied else said.lstrip(" and"), []).append(r)
        if 100.0 in against:
            higher.append(against[100.0].outcome == "higher")
    ends = [f"{k} at {_ratio_words(rs)}" for k, rs in ends.items()]
    lines.append(f"- Lowest α: {'; '.join(ends)}.")
    if len(higher) == len(ratios) and all(higher):
        lines.append("- α = 100 is higher than the lowest α at every ratio.")
        if "holds" not in little.values():
            lines[-1] += " So we disagree with the paper: α = 100 is not best with little data."
    return lines


def _fig5_section(out_dir) -> str:
    runs = complete_seeds(load_grid(out_dir, "alpha-cifar10"))
    text = _heading(out_dir, "Fig. 4: α against the amount of training data", "alpha-cifar10", runs)
    rows, best = fig5_table(runs)
    if not rows:
        return "\n".join(text + ["", "pending"])
    header = ["α \\ train ratio"] + [f"{r}" for r in FIG5_RATIOS]
    text += [
        "",
        "HCCT's mean test error (%) on CIFAR-10, seed means: final epoch, best epoch in brackets.",
        "",
        to_markdown(header, [[r[0]] + [re.sub(" ± [0-9.]+", "", c) for c in r[1:]] for r in rows]),
        *figure_link(out_dir, "04_alpha_vs_train_ratio.png", "Fig. 4, ours (final epoch)"),
        "",
        *_fig5_verdict(runs, best),
    ]
    return "\n".join(text)


def _size_verdict(runs, n, ks, errors) -> str:
    """Fig. 5 at size ``n``: the K of lowest error, judged by the rule against every other K."""
    values = {k: per_seed([r for r in runs if _nk(r) == (n, k)]) for k in ks}
    top, tied = extreme(values, noise_of(runs), "lower")
    said = (
        f"a tie by the rule with K = {', '.join(map(str, sorted(tied)))}"
        if tied
        else "lower than every other K by the rule"
    )
    return f"- Lowest error: K = {top} ({min(errors):.2f}), {said}."


def _nk(r) -> tuple:
    return r["config"]["n_clients"], r["config"]["fixed_groups"]


def _utility_at_top(runs, n, ks) -> tuple:
    """``(K with the highest seed-mean utility, seeds where it is highest, seeds)``."""
    per = {}
    for r in runs:
        if r["config"]["n_clients"] == n:
            per.setdefault(r["seed"], {})[r["config"]["fixed_groups"]] = final_utility(r)
    mean = {k: np.mean([u[k] for u in per.values()]) for k in ks}
    top = max(mean, key=mean.get)
    return top, sum(max(u, key=u.get) == top for u in per.values()), len(per)


def _paper_k_verdict(runs, n, ks, errors, utilities, paper_k) -> list:
    """Fig. 5's two halves: the error's optimum at ``paper_k`` by the rule, the utility's."""
    k_err = ks[int(np.argmin(errors))]
    if k_err == paper_k:
        error_half = claim([k_against(runs, n, paper_k, k) for k in ks if k != paper_k])
        said = f"K = {paper_k} against every other K"
    else:
        c = k_against(runs, n, k_err, paper_k)
        error_half = {"lower": "does not hold", "higher": "holds"}.get(c.outcome, c.outcome)
        said = f"K = {k_err} against K = {paper_k}: {c.words()}"
    top, at, seeds = _utility_at_top(runs, n, ks)
    if top == paper_k:
        utility = f"**holds**: the utility is highest at K = {paper_k} at {at} of {seeds} seeds"
    else:
        verdict = "does not hold" if at == seeds else "not resolved"
        utility = f"**{verdict}**: the utility is highest at K = {top} at {at} of {seeds} seeds"
    lines = [
        f"- The paper's optimum at K = {paper_k}: its error half **{error_half}** ({said}).",
        f"- Its utility half {utility}.",
    ]
    if top == ks[-1] and np.all(np.diff(utilities) > 0):
        lines.append(
            f"- Why: a singleton's cosine is 1, so at α = {_alpha(runs)} the utility rises with "
            f"K. Our Digit has {len({d for r in runs for d in r['domains']})} domains, the "
            f"paper's {len(TABLE_III['digit']['domains'].split(', '))}."
        )
    return lines


def _fixed_k_section(out_dir) -> str:
    grid = "fixed-k-digit"
    runs = complete_seeds(load_grid(out_dir, grid))
    text = _heading(out_dir, "Fig. 5: a fixed number of groups", grid, runs)
    if not runs:
        return "\n".join(text + ["", "pending"])
    plan = planned_ks(grid)
    text += [
        "",
        "HCCT on Digit with K groups: mean test error (%) and total utility at the final "
        "epoch, seed means.",
    ]
    for n, (ks, errors, utilities) in fixed_k_summary(runs).items():
        have = dict(zip(ks, zip(errors, utilities, strict=True), strict=True))
        cells = [have.get(k) for k in plan[n]]
        rows = [
            [what] + [f"{c[i]:.2f}" if c else "pending" for c in cells]
            for i, what in enumerate(("error", "total utility"))
        ]
        text += ["", to_markdown(["K"] + [str(k) for k in plan[n]], rows)]
        text += figure_link(out_dir, "04_fixed_k.png", "Fig. 5, ours")
        missing = [k for k in plan[n] if k not in have]
        if missing:
            text += ["", f"N = {n}: K = {', '.join(map(str, missing))} pending; no verdict yet."]
            continue
        text += ["", _size_verdict(runs, n, ks, errors)]
        text += _paper_k_verdict(runs, n, ks, errors, utilities, 10)
    return "\n".join(text)


def _k_vs_n_section(out_dir) -> str:
    grid = "k-vs-n-digit"
    runs = complete_seeds(load_grid(out_dir, grid))
    text = _heading(out_dir, "Fig. 6: a fixed number of groups as N grows", grid, runs)
    if not runs:
        return "\n".join(text + ["", "pending"])
    plan = planned_ks(grid)
    summary = fixed_k_summary(runs)
    limited = sorted({k for ks in plan.values() for k in ks[:-1]})
    errors = {n: dict(zip(ks, errs, strict=True)) for n, (ks, errs, _) in summary.items()}

    def cell(n, k):
        return f"{errors[n][k]:.2f}" if k in errors.get(n, {}) else "pending"

    rows = [[str(k)] + [cell(n, k) for n in plan] for k in limited]
    rows.append(["N"] + [cell(n, n) for n in plan])
    text += [
        "",
        "HCCT on Digit with K groups: mean test error (%) at the final epoch, seed means.",
        "",
        to_markdown(["K"] + [f"N = {n}" for n in plan], rows),
        *figure_link(out_dir, "04_k_vs_n.png", "Fig. 6, ours"),
        "",
        *_k_vs_n_verdict(runs, plan),
    ]
    return "\n".join(text)


def _k_vs_n_verdict(runs, plan) -> list:
    margins = limited_k_margins(runs)
    pending = [n for n in plan if n not in margins]
    if not margins:
        return [f"- The paper's claim: no N has every K yet; N = {_ratio_words(pending)} pending."]
    verdicts = {n: (k, k_against(runs, n, k, 1)) for n, (k, *_) in margins.items()}
    by = {}
    for n, (_, c) in verdicts.items():
        by.setdefault(claim([c]), []).append(str(n))
    said = "; ".join(f"{v} at N = {', '.join(ns)}" for v, ns in by.items())
    lines = [
        "- Some 1 < K < N below one global model (K = 1), by the rule: "
        f"**{said}**" + (f"; N = {', '.join(map(str, pending))} pending." if pending else "."),
        "- Each N's K has its lowest seed-mean error, chosen on these runs: that favours "
        "the claim.",
    ]
    lines += [
        f"- N = {n}, K = {k} against K = 1: {c.outcome} ({c.words()})."
        for n, (k, c) in verdicts.items()
        if c.outcome != "lower"
    ]
    return lines


def figure_sections(out_dir: str) -> list:
    """The markdown sections of Figs. 3-6, in the paper's order."""
    return [
        _fig4_section(out_dir),
        _fig5_section(out_dir),
        _fixed_k_section(out_dir),
        _k_vs_n_section(out_dir),
    ]
