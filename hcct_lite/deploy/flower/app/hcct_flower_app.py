"""Flower App components: hcct-lite's ServerApp and ClientApp."""

from hcct_lite.deploy.flower.client import app as client_app
from hcct_lite.deploy.flower.server import app as server_app

__all__ = ["client_app", "server_app"]
