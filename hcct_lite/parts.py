"""The package's optional parts, found through package entry points.

The core (the paper's algorithm, its runs, the lessons and the command line) imports no
optional part. It names a few places where a part may add something: a trainer, a way
of running a grid, the deployment's defence, a subcommand, options, a check of settings. A
part registers what it adds there by name, as ``"module:attribute"``, and the core
imports that module only when it uses it. The installed parts are found once, through
the entry points of the group :data:`GROUP`.

Another package adds schemes, tasks and networks the same way (an *extension*): its
entry point's function calls :func:`~hcct_lite.register_scheme`,
:func:`~hcct_lite.register_task` or :func:`~hcct_lite.register_model`. Each registry
loads the parts before it is read, so every process sees them: the command line, a
grid's worker processes, Ray's workers and ``verify``. ``docs/extending.md`` shows one.

Examples
--------
A part's entry point names a function that registers what it adds::

    [project.entry-points."hcct_lite.parts"]
    gpu = "hcct_lite.gpu:register"
"""

from __future__ import annotations

import importlib
import warnings
from importlib.metadata import entry_points

__all__ = [
    "GROUP",
    "KINDS",
    "register",
    "find",
    "each",
    "part_settings",
    "load_parts",
    "part_missing",
    "track",
    "extensions",
]

GROUP = "hcct_lite.parts"
# what a part may add, and what the core does with it
KINDS = {
    "trainer": "local SGD of a run's clients (cfg, model, device) -> a trainer",
    "runner": "a way of running a grid's jobs",
    "defence": "the deployment's defence layer around a run (cfg) -> a layer",
    "command": "subcommands: add(sub) adds them, each with set_defaults(part_command=run)",
    "settings": "a part's settings of a run: a dict name -> default (RunConfig.option)",
    "check": "a check of the part's settings of a RunConfig (cfg) -> None, raising ValueError",
    "options": "options of a run's command line: add(parser) adds a group of them",
    "grid-options": "options of compare and reproduce: add(parser, command), read(args)",
}
# each part of this package, and the install extra that brings what it needs
EXTRAS = {"deploy": "flower", "gpu": "gpu", "ray": "ray"}
_REGISTRY: dict = {kind: {} for kind in KINDS}
_LOADED: list = []
_TABLES: list = []  # the registries a part may add to (schemes, tasks, networks)
_DISTRIBUTIONS: dict = {}  # part -> "distribution version", for parts of other packages


def track(*tables: dict) -> None:
    """Let the parts add to ``tables`` (a registry's dicts): a part that fails is undone."""
    _TABLES.extend(tables)


def register(kind: str, name: str, target: str, part: str) -> None:
    """Say that ``part`` adds ``target`` (``"module:attribute"``) as the ``kind`` ``name``.

    Raises
    ------
    ValueError
        If ``kind`` is not one of :data:`KINDS`, ``target`` is not ``"module:attribute"``,
        or another part registered the same ``kind`` and ``name``.
    """
    if kind not in KINDS:
        raise ValueError(f"unknown kind {kind!r}; choose from {sorted(KINDS)}")
    if not isinstance(target, str) or target.count(":") != 1:
        raise ValueError(f"target must be 'module:attribute'; got {target!r}")
    have = _REGISTRY[kind].get(name)
    if have is not None and have[1] != part:
        raise ValueError(f"the {kind} {name!r} is registered already, by the part {have[1]!r}")
    _REGISTRY[kind][name] = (target, part)


def _resolve(target: str):
    module, attr = target.split(":")
    return getattr(importlib.import_module(module), attr)


def find(kind: str, name: str):
    """What a part registered as the ``kind`` ``name`` (imported now), or None."""
    load_parts()
    entry = _REGISTRY[kind].get(name)
    return None if entry is None else _resolve(entry[0])


def each(kind: str) -> dict:
    """Every ``kind`` the installed parts registered, name -> object (imported now)."""
    load_parts()
    return {name: _resolve(target) for name, (target, _part) in sorted(_REGISTRY[kind].items())}


def part_settings() -> dict:
    """``name -> (default, part)`` of every setting the installed optional parts add.

    A part registers its settings as a dict ``name -> default`` (the kind ``"settings"``
    of this registry, under the part's name).
    """
    out = {}
    for part, spec in each("settings").items():
        for name, default in spec.items():
            out[name] = (default, part)
    return out


def load_parts() -> tuple:
    """Let every installed part register what it adds, once; return the parts' names.

    A part that fails to load (an import error, a name another part took) is left out with
    a warning naming it; the others load as usual.
    """
    if not _LOADED:
        _LOADED.append([])  # a part that asks for the parts while it loads sees them loading
        for ep in sorted(entry_points(group=GROUP), key=lambda e: e.name):
            before = {kind: dict(names) for kind, names in _REGISTRY.items()}
            tables = [dict(t) for t in _TABLES]
            try:
                ep.load()()
            except Exception as err:  # a broken part must not take the others down
                _REGISTRY.update(before)  # nothing half-registered stays
                for table, kept in zip(_TABLES, tables, strict=True):
                    table.clear()
                    table.update(kept)
                warnings.warn(
                    f"the hcct-lite part {ep.name!r} ({ep.value}) failed to load and is left "
                    f"out: {type(err).__name__}: {err}",
                    stacklevel=2,
                )
                continue
            _LOADED[0].append(ep.name)
            dist = getattr(ep, "dist", None)
            if dist is not None and dist.name.replace("_", "-") != "hcct-lite":
                _DISTRIBUTIONS[ep.name] = f"{dist.name} {dist.version}"
    return tuple(_LOADED[0])


def extensions() -> dict:
    """``part -> "distribution version"`` of each loaded part from another package."""
    load_parts()
    return dict(_DISTRIBUTIONS)


def part_missing(what: str, part: str) -> ValueError:
    """The error for ``what``, which needs the part ``part`` that registered nothing.

    The parts of this package come with it: they are missing only where it is not
    installed (a source tree on ``PYTHONPATH``), or where a part failed to load (warned).
    """
    return ValueError(
        f"{what} needs the {part} part of hcct-lite, which did not register: install the "
        f"package (pip install -e '.[{EXTRAS.get(part, part)}]' in a checkout)"
    )
