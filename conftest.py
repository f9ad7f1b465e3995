"""How ``make test`` shares the tests among the cores (pytest-xdist, ``-n auto``).

A notebook's cells share one kernel and run in order: so each file goes whole to one
worker, except the deployment tests, each of which starts a federation of its own (free
ports, its own folder) and waits on its timeouts. xdist hands out the scopes with the most
tests first; among equals, the federations and then the notebooks come first.
"""

from pathlib import Path

import pytest
from xdist.scheduler import LoadScopeScheduling

# files whose every test starts a federation (minutes each, much of it waiting on timeouts)
FEDERATION_FILES = {"test_flower_deploy.py", "test_silo_recovery.py"}


class FileScheduling(LoadScopeScheduling):
    """xdist's scope scheduling with a file (a federation test alone) as the scope."""

    def _split_scope(self, nodeid: str) -> str:
        path = nodeid.split("::", 1)[0]
        # a federation test waits on its round timeouts: each is a scope of its
        # own, so they spread over the workers instead of queueing on one
        return nodeid if Path(path).name in FEDERATION_FILES else path


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """Each worker takes whole files (:class:`FileScheduling`)."""
    return FileScheduling(config, log)


def _start_order(item) -> int:
    """0 for the federation files, 1 for a notebook, 2 for the rest."""
    if item.path.name in FEDERATION_FILES:
        return 0
    return 1 if item.path.suffix == ".ipynb" else 2


def pytest_collection_modifyitems(config, items):
    """The federations, then the notebooks, then the rest (xdist then puts larger scopes first)."""
    # stable: each notebook's cells keep their order, and every worker sees the same order
    items.sort(key=_start_order)
