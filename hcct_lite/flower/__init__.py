"""HCCT on Flower: the library's engine with Flower ClientApps as its clients.

The same schemes, partition, aggregation and local training run with the clients as
Flower ClientApps (in one process, in Flower's simulation engine or on real SuperNodes).

Needs the ``flower`` extra: ``pip install "hcct-lite[flower]"``.

- :mod:`hcct_lite.flower.server`: the ServerApp and :class:`FlowerBackend`, which lets the
  library's training loop (:func:`hcct_lite.training.engine.run_experiment`) talk to ClientApps.
- :mod:`hcct_lite.flower.client`: the ClientApp (hcct-lite's local SGD on the node's data).
- :mod:`hcct_lite.flower.simulation`: ``hcct-lite flower-sim`` (engine ``inline`` or ``ray``).
- :mod:`hcct_lite.flower.inline`: :class:`InlineGrid`, every silo in one process.
- :mod:`hcct_lite.flower.silo_data`: a silo's own data, loaded once.
- :mod:`hcct_lite.flower.silo_exec`: ``hcct-lite silo-exec``, a warm SuperExec for a silo.
- :mod:`hcct_lite.flower.processes`: processes a test or benchmark starts for a
  federation end with their starter (:func:`~hcct_lite.flower.processes.die_with_parent`).
"""
