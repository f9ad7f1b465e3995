"""HCCT on Flower: the library's engine with Flower ClientApps as its clients.

The same schemes, partition, aggregation and local training run with the clients as
Flower ClientApps (in one process, in Flower's simulation engine or on real SuperNodes).

Needs the ``flower`` extra: ``pip install "hcct-lite[flower]"``.

- :mod:`hcct_lite.deploy.flower.server`: the ServerApp and :class:`FlowerBackend`, which lets the
  library's training loop (:func:`hcct_lite.training.engine.run_experiment`) talk to ClientApps.
- :mod:`hcct_lite.deploy.flower.client`: the ClientApp (hcct-lite's local SGD on the node's data).
- :mod:`hcct_lite.deploy.flower.simulation`: ``hcct-lite flower-sim`` (engine ``inline``, the
  in-process grid of :mod:`hcct_lite.deploy.inline`, or ``ray``).
- :mod:`hcct_lite.deploy.flower.reading`: every silo reply read field by field.
- :mod:`hcct_lite.deploy.flower.silo_data`: a silo's own data, loaded once.

Everything here uses Flower's public API only (``flwr.app``, ``flwr.clientapp``,
``flwr.serverapp``, ``flwr.simulation``); the tools that need Flower's internals
(the in-process grid, ``silo-exec``, ``flower-run``) live in :mod:`hcct_lite.deploy`.
"""
