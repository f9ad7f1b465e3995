"""hcct-lite: collaboration patterns in cross-silo federated learning.

HCCT (Sun, Kountouris and Zhang, arXiv 2401.13236) and its baselines. The names below are
the stable public API. Each layer imports only from those listed before it:

- :mod:`~hcct_lite.partition` (Algorithm 2, problem P1), :mod:`~hcct_lite.theory` (Theorem 1);
- :mod:`~hcct_lite.schemes`: HCCT and the baselines;
- :mod:`~hcct_lite.training`: data, models, local SGD and Algorithm 1's loop;
- :mod:`~hcct_lite.runs`: running, storing, reading and verifying runs;
- :mod:`~hcct_lite.reproduction`: the paper's grids, numbers and report;
- :mod:`~hcct_lite.lessons` and :mod:`~hcct_lite.viz`: the notebooks' material and figures;
- optional parts, each behind its extra: :mod:`~hcct_lite.deploy`, :mod:`~hcct_lite.gpu`
  and :mod:`~hcct_lite.ray` (:mod:`~hcct_lite.parts` says how the core finds them).
"""

from .partition import Partition, client_partition, optimal_partition, select_layer
from .runs.runner import run_grid
from .schemes import make_scheme, register_scheme
from .training import (
    Backend,
    ClientData,
    LocalBackend,
    LocalObjective,
    RunConfig,
    build_clients,
    build_model,
    make_config,
    register_model,
    register_task,
    run_experiment,
)

__all__ = [
    "client_partition",
    "optimal_partition",
    "Partition",
    "select_layer",
    "make_config",
    "RunConfig",
    "build_clients",
    "build_model",
    "run_experiment",
    "LocalBackend",
    "Backend",
    "make_scheme",
    "register_scheme",
    "register_task",
    "register_model",
    "ClientData",
    "LocalObjective",
    "run_grid",
]
__version__ = "0.1.0"

# The notebooks' names, loaded on first use so that `import hcct_lite` stays light (no
# matplotlib, no experiment code) for the Flower workers and the command line. They are
# attributes (`hl.plot_curves`) and listed by dir(), but not in __all__: a star import
# reads every name of __all__, which would load them all.
_TEACHING = {
    "hcct_lite.lessons.modes": [
        "Mode",
        "notebook_mode",
        "classroom_style",
        "solutions_shown",
        "task_settings",
        "results_dir",
        "Stopwatch",
    ],
    "hcct_lite.lessons.shipped": [
        "motivating_results",
        "common_seeds",
        "scheme_runs",
        "grid_runs",
        "grid_progress",
        "pending_note",
        "scheme_claims",
        "best_epoch_means",
        "worst_client",
    ],
    "hcct_lite.reproduction.figure_checks": [
        "incoming_curves",
        "alpha_ratio_errors",
        "alpha_ratio_stats",
        "fixed_k_summary",
        "planned_ks",
        "complete_sizes",
        "figure_claims",
        "seeds_by_size",
        "limited_k_margins",
        "fixed_k_std",
        "paired_wins",
    ],
    "hcct_lite.lessons.decisions": [
        "DECISION_GRIDS",
        "decision_runs",
        "numbered",
        "truth_agreement",
        "consecutive_agreement",
        "decision_claims",
    ],
    "hcct_lite.reproduction.motivating_example": [
        "pattern_claims",
        "pattern_means",
        "pattern_stds",
        "motivating_table",
        "pattern_ranking",
        "selfish_choices",
        "shipped_differences",
    ],
    "hcct_lite.lessons.misleads": [
        "buffer_summary",
        "scheme_summary",
        "alpha_summary",
        "validated_alpha",
        "validation_choices",
        "break_even_grid",
        "iid_summary",
        "misleads_claims",
        "rotation_agreement",
    ],
    "hcct_lite.reproduction.paper": [
        "TABLE_II",
        "TABLE_III_ALPHA",
        "TABLE_IV",
        "TABLE_V",
        "FIGURES",
    ],
    "hcct_lite.runs.results": ["to_text"],
    "hcct_lite.reproduction.report_tables": [
        "protocol_table",
        "per_client_rows",
        "setup_table",
        "domain_cosines",
        "ablation_summary",
    ],
    "hcct_lite.runs.reading": ["by_scheme", "epoch_groups"],
    "hcct_lite.lessons.gradient_similarity": ["label_mix_similarity", "first_updates"],
    "hcct_lite.partition.updates": ["cosine_matrix"],
    "hcct_lite.partition.merge_steps": [
        "merge_steps",
        "pair_benefits",
        "break_even_alpha",
        "benefit_parts",
        "pair_benefit_parts",
    ],
    "hcct_lite.partition.exact": ["greedy_vs_optimal"],
    "hcct_lite.partition.reference": ["compare_speed"],
    "hcct_lite.partition.synthetic": ["clustered_updates"],
    "hcct_lite.lessons.exercises": ["check", "EXERCISES"],
    "hcct_lite.lessons.assessment": ["assessment_variant"],
    "hcct_lite.theory": [
        "alpha_equivalent",
        "join_gain",
        "error_bound",
        "utility",
        "learning_rate_sum",
    ],
    "hcct_lite.training.config": ["SCHEMES", "arrival_epochs"],
    "hcct_lite.viz.plots": [
        "save_figure",
        "plot_dendrogram",
        "plot_merge_steps",
        "plot_bound",
        "plot_label_similarity",
        "plot_utility_curves",
        "plot_scheme_bars",
    ],
    "hcct_lite.viz.charts": [
        "plot_pattern_bars",
        "plot_curves",
        "plot_alpha_ratio",
        "plot_fixed_k",
        "plot_fixed_k_by_size",
        "plot_cosines_side_by_side",
    ],
    "hcct_lite.viz.decisions": ["plot_group_timeline", "plot_group_timelines"],
    "hcct_lite.viz.misleads": ["plot_scheme_study", "plot_break_even", "plot_alpha_sweep"],
    "hcct_lite.viz.designer": ["federation_designer", "draw_designer", "draw_training"],
    "hcct_lite.lessons.designer": ["Designer", "Silo", "PRESETS"],
    "hcct_lite.viz.widgets": ["partition_explorer", "bound_explorer"],
}
_LAZY = {name: module for module, names in _TEACHING.items() for name in names}


def __getattr__(name):
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value  # later lookups skip this function
        return value
    raise AttributeError(f"module 'hcct_lite' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
