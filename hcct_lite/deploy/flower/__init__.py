"""HCCT on Flower: the library's engine with Flower ClientApps as its clients.

Flower's public API only; the tools that need its internals live in :mod:`hcct_lite.deploy`.
Needs the ``flower`` extra: ``pip install "hcct-lite[flower]"``.

- :mod:`.server`: the ServerApp and :class:`~.server.FlowerBackend`, the engine's backend;
- :mod:`.client`: the ClientApp, hcct-lite's local SGD on the node's data;
- :mod:`.simulation`: ``hcct-lite flower-sim`` (engine ``inline`` or ``ray``);
- :mod:`.reading`: every silo reply read field by field;
- :mod:`.silo_data`: a silo's own data, loaded once.
"""
