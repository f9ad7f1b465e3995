"""Deployment tools that reach into Flower's internals, in one room on a pinned Flower.

:mod:`hcct_lite.flower` holds what uses Flower's public API (the ServerApp and ClientApp,
reading replies, a silo's data, the simulation). What needs Flower's private code lives
here, and each private use is a name of :mod:`.flower_internals`, the only module that
imports one:

- :mod:`.inline`: :class:`~.inline.InlineGrid`, every silo in one process (``flower-sim``'s
  default engine), messages as the bytes a SuperLink stores.
- :mod:`.silo_exec`: ``hcct-lite silo-exec``, a warm SuperExec for a silo, forking per task;
  :mod:`.task_journal`: what it keeps of each task, to answer for one that died.
- :mod:`.submit`: ``hcct-lite flower-run``, a run submitted and waited for.
- :mod:`.processes`: processes a test or benchmark starts for a federation end with their
  starter (:func:`~.processes.die_with_parent`).

Flower is pinned to :data:`.flower_internals.TESTED_RANGE`; ``make flower-next`` runs the
Flower tests against Flower's nightly build (docs/deploy.md).
"""
