"""The deployment, an optional part: Flower apps, their defences, privacy, deploy tools.

- :mod:`.flower`: the ServerApp and ClientApp on Flower's public API, and the simulation;
- :mod:`.defences`: the count bound, the norm rule and the robust aggregators;
- :mod:`.privacy`: DP-SGD at a silo (Opacus);
- :mod:`.commands`: the subcommands ``flower-sim``, ``flower-run`` and ``silo-exec``;
- :mod:`.inline`, :mod:`.silo_exec` with :mod:`.task_journal`, :mod:`.submit`: the tools
  that need Flower's private code, each private use a name of :mod:`.flower_internals`;
- :mod:`.processes`: a federation's processes end with their starter.
"""

from __future__ import annotations

__all__ = ["SETTINGS", "register"]

# The deployment's settings of a run and their defaults (off: the paper's algorithm)
SETTINGS = {
    "norm_limit": 0.0,  # refuse an update longer than this multiple of the median's
    "count_bound": 0.0,  # a declared sample count at most this multiple of the median
    "aggregator": "mean",  # FedAvg, or a robust rule of .defences.robust
    "clip_factor": 4.0,  # a robust rule's clip, a multiple of the norm bound
    "trim_fraction": 0.25,  # trimmed-mean: the share dropped at each side
}


def register() -> None:
    """Tell the core what this part adds (its entry point calls this)."""
    from ..parts import register as add

    add("settings", "deploy", "hcct_lite.deploy:SETTINGS", "deploy")
    add("defence", "deployment", "hcct_lite.deploy.defences.layer:Defence", "deploy")
    add("check", "deploy", "hcct_lite.deploy.defences.layer:check_config", "deploy")
    add("options", "defence", "hcct_lite.deploy.defences.layer:add_options", "deploy")
    add("command", "deployment", "hcct_lite.deploy.commands:add_commands", "deploy")
    add("grid-options", "defence", "hcct_lite.deploy.commands:GridOptions", "deploy")
