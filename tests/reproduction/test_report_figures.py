"""The report's Figs. 3-6 sections: summaries of partly shipped grids and their verdicts."""

import json

import pytest

from hcct_lite.reproduction.report_figures import fig4_table, fig5_table, figure_sections
from hcct_lite.runs.reading import complete_seeds, variant


def _run(name, seed, config=None, final=0.0, best=0.0, history=None):
    return {
        "name": f"{name}-seed{seed}",
        "seed": seed,
        "config": config or {},
        "final": {"mean": final, "best_over_epochs": {"mean": best}},
        "history": history or [],
    }


def test_variant_drops_only_the_last_seed_suffix():
    assert variant(_run("ratio0.1-alpha100", 2)) == "ratio0.1-alpha100"
    assert variant({"name": "a-seed1-seed3"}) == "a-seed1"


def test_complete_seeds_keeps_the_seeds_every_variant_has():
    runs = [_run("k1", 0), _run("k2", 0), _run("k1", 1)]  # seed 1 lacks k2
    assert [(variant(r), r["seed"]) for r in complete_seeds(runs)] == [("k1", 0), ("k2", 0)]
    assert complete_seeds([]) == []


def _fig4_run(n_new, seed, curve, incumbents, groups=3):
    cfg = {"new_clients": n_new, "join_every": 2, "initial_clients": 2}
    last = {"mean_test_error": curve[-1], "client_test_error": incumbents + [50.0] * n_new}
    hist = [{"mean_test_error": e} for e in curve[:-1]] + [last]
    last["groups"] = [[i] for i in range(groups)]
    return _run(f"new{n_new}", seed, cfg, history=hist)


def test_fig4_table_reads_checkpoints_incumbents_and_groups():
    runs = [
        _fig4_run(0, 0, [40, 30, 20], [10.0, 30.0], groups=2),
        _fig4_run(0, 1, [60, 50, 40], [30.0, 50.0], groups=2),
        _fig4_run(1, 0, [40, 35, 25], [20.0, 20.0]),
    ]
    rows, checkpoints = fig4_table(runs)
    assert checkpoints == [2, 3]  # every 2 epochs, and the last epoch
    assert rows[0] == ["0 new per 2 epochs", "40.00", "30.00", "30.00", "2.0 / 2"]
    assert rows[1] == ["1 new per 2 epochs", "35.00", "25.00", "20.00", "3.0 / 3"]
    assert fig4_table([]) == ([], [])


def test_fig5_table_marks_pending_cells_and_finds_the_best_alpha_per_protocol():
    runs = [
        _run(f"r-a{a}", s, {"train_ratio": 0.1, "alpha": a}, final=f, best=b)
        for s, (a, f, b) in enumerate([(1.0, 60, 55), (100.0, 70, 50), (1.0, 62, 57)])
    ]
    rows, best = fig5_table(runs)
    assert rows[0][0] == "1" and rows[0][2] == "61.00 ± 1.00 (56.00)"
    assert rows[0][1] == "pending" and rows[1][2] == "70.00 ± 0.00 (50.00)"
    assert best == {0.1: (1.0, 100.0)}


def _complete(r):
    """``r`` as a whole result file, as the report reads only those: a config a run accepts,
    one error per client present in each epoch, groups, sizes, domains, and a final block
    that is its history's summary."""
    from hcct_lite.training.config import arrival_epochs, make_config
    from hcct_lite.training.engine import summarize

    history = [dict(h) for h in r["history"]]
    last = history[-1].get("client_test_error")
    kw = dict(r["config"], epochs=len(history))
    kw["n_clients"] = len(last) if last else kw.get("n_clients", 2)
    if kw.get("new_clients"):
        kw["join_every"] = 1  # every newcomer present by the last epoch, as its errors say
    cfg = make_config("cifar10", "hcct", r["seed"], **kw)
    arrive = arrival_epochs(cfg)
    for t, h in enumerate(history):
        active = int((arrive <= t).sum())
        h.setdefault("client_test_error", [h.get("mean_test_error", r["final"]["mean"])] * active)
        h["groups"] = [g for g in h.get("groups", [[i] for i in range(active)]) if max(g) < active]
        errors, mean = h["client_test_error"], h.get("mean_test_error")
        first = kw.get("initial_clients", len(errors))
        if mean is not None and len(errors) > first:  # newcomers' errors make the stated mean
            rest = (mean * len(errors) - sum(errors[:first])) / (len(errors) - first)
            errors[first:] = [rest] * (len(errors) - first)
        h.update(
            epoch=t,
            lr=cfg.lr * cfg.lr_decay**t,
            n_groups=len(h["groups"]),
            mean_test_error=sum(errors) / len(errors),
            missing=[],
            train_loss=[0.5] * len(errors),
        )
    return dict(
        r,
        task="cifar10",
        scheme="hcct",
        config=cfg.to_dict(),
        history=history,
        final=summarize(history),
        sizes=[100] * cfg.n_clients,
        domains=["cifar10"] * cfg.n_clients,
    )


def _write(tmp_path, grid, runs):
    folder = tmp_path / grid
    folder.mkdir(parents=True)
    for r in runs:
        (folder / f"{r['name']}.json").write_text(json.dumps(_complete(r)))


def test_the_report_refuses_a_broken_result_naming_it(tmp_path):
    _write(tmp_path, "incoming-cifar10", [_fig4_run(0, 0, [50, 40], [40.0, 40.0])])
    path = tmp_path / "incoming-cifar10" / "new0-seed0.json"
    broken = json.loads(path.read_text())
    broken["final"]["mean"] = float("nan")
    path.write_text(json.dumps(broken))
    with pytest.raises(ValueError, match="new0-seed0.json: not a complete result"):
        figure_sections(str(tmp_path))


@pytest.mark.parametrize(
    "finals, verdict",
    [
        ({0: (40, 35), 1: (42, 38)}, "holds"),  # lower at every seed (CPU runs: no noise)
        ({0: (40, 45), 1: (42, 44)}, "does not hold"),
        ({0: (40, 35), 1: (42, 44)}, "not resolved"),  # one seed each way
        ({0: (40, 35)}, "not resolved"),  # one seed cannot show it is the same at every seed
    ],
)
def test_fig3_verdict_follows_the_rule(tmp_path, finals, verdict):
    runs = [_fig4_run(n, s, [50, f], [f, f]) for s, fs in finals.items() for n, f in enumerate(fs)]
    _write(tmp_path, "incoming-cifar10", runs)
    text = figure_sections(str(tmp_path))[0]
    assert f"More arrivals end lower: **{verdict}**" in text, text
    assert f"{len(runs)} of 9 runs" in text


def _k_run(n, k, error, utility, seed=0):
    return _run(
        f"n{n}-k{k}",
        seed,
        {"n_clients": n, "fixed_groups": k},
        final=error,
        history=[{"total_utility": utility}],
    )


def test_fixed_k_verdict_names_the_best_k_and_pending_grids(tmp_path):
    ks = [1, 2, 3, 4, 5, 6, 8, 10, 12, 15, 20]
    runs = [_k_run(20, k, 5 + abs(k - 10) + s, -abs(k - 10), s) for k in ks for s in (0, 1)]
    _write(tmp_path, "fixed-k-digit", runs)
    fig3, fig4, fig5, fig6 = figure_sections(str(tmp_path))
    errors = [f"{5 + abs(k - 10) + 0.5:.2f}" for k in ks]  # seed means: 14.50 at K = 1 ...
    assert f"| error | {' | '.join(errors)} |" in fig5
    assert "Lowest error: K = 10 (5.50), lower than every other K by the rule." in fig5
    assert "its error half **holds** (K = 10 against every other K)" in fig5
    assert "Its utility half **holds**: the utility is highest at K = 10 at 2 of 2 seeds" in fig5
    assert fig3.endswith("pending") and fig4.endswith("pending") and fig6.endswith("pending")


def test_fixed_k_lowest_error_within_the_rule_is_a_tie(tmp_path):
    # K = 5 has the lowest seed mean, but K = 10 is lower at one seed: a tie by the rule
    ks = [1, 2, 3, 4, 5, 6, 8, 10, 12, 15, 20]
    err = {0: {5: 5.0, 10: 6.0}, 1: {5: 5.0, 10: 4.5}}
    runs = [
        _k_run(20, k, err[s].get(k, 9.0 + k), k if k != 20 else 30, s) for k in ks for s in (0, 1)
    ]
    _write(tmp_path, "fixed-k-digit", runs)
    fig5 = figure_sections(str(tmp_path))[2]
    assert "Lowest error: K = 5 (5.00), a tie by the rule with K = 10." in fig5, fig5
    assert "its error half **not resolved** (K = 5 against K = 10: -0.25 points" in fig5
    assert "Its utility half **does not hold**: the utility is highest at K = 20" in fig5


def test_a_partly_run_size_is_shown_pending_and_not_judged(tmp_path):
    runs = [_k_run(10, k, e, k) for k, e in ((1, 9.0), (2, 8.0), (5, 7.0), (10, 12.0))]
    runs += [_k_run(20, k, 1.0, k) for k in (1, 2)]
    _write(tmp_path, "k-vs-n-digit", runs)
    fig6 = figure_sections(str(tmp_path))[3]
    # one column per N: N = 20 has K = 1 and 2 only, N = 30 to 50 nothing yet
    assert "| 1 | 9.00 | 1.00 | pending | pending | pending |" in fig6
    assert "| 5 | 7.00 | pending | pending | pending | pending |" in fig6
    assert "| N | 12.00 | pending | pending | pending | pending |" in fig6
    # one seed never resolves a comparison, however large the gain
    assert "**not resolved at N = 10**; N = 20, 30, 40, 50 pending." in fig6
    assert (
        "N = 10, K = 5 against K = 1: not resolved (-2.00 points, lower at 1 of 1 seeds)." in fig6
    )


def test_figure_claims_follow_the_runs():
    from hcct_lite import figure_claims

    runs = [_fig4_run(0, 0, [50, 40], [40.0, 40.0]), _fig4_run(1, 0, [50, 38], [40.5, 40.5])]
    for r in runs:
        r["history"][-1]["client_test_error"] = r["history"][-1]["client_test_error"][:2]
        r["config"]["initial_clients"] = 2
    claims = figure_claims(runs, "incoming-cifar10")
    assert list(claims.values()) == [True, True]
    runs = [
        _run(
            f"k{k}",
            0,
            {"n_clients": 20, "fixed_groups": k},
            final=e,
            history=[{"total_utility": 0.0}],
        )
        for k, e in ((1, 9.0), (10, 5.0), (20, 8.0))
    ]
    # flat utility, best K = 10 > N/4: the paper's claims hold, the utility ones do not
    assert list(figure_claims(runs, "fixed-k-digit").values()) == [True, True, False, False, False]
    with pytest.raises(ValueError, match="no claims for grid 'fig9'"):
        figure_claims(runs, "fig9")


def test_complete_seeds_judges_each_federation_size_apart():
    # N = 10 has both K at seeds 0 and 1; N = 20 has both only at seed 0
    runs = [
        _run(f"n{n}-k{k}", s, {"n_clients": n}) for n in (10, 20) for k in (1, 2) for s in (0, 1)
    ]
    runs = [r for r in runs if r["name"] != "n20-k2-seed1"]
    kept = sorted(r["name"] for r in complete_seeds(runs))
    assert kept == [
        "n10-k1-seed0",
        "n10-k1-seed1",
        "n10-k2-seed0",
        "n10-k2-seed1",
        "n20-k1-seed0",
        "n20-k2-seed0",
    ]
