"""How the tests are marked and how ``make test`` shares them among the cores.

Markers (:func:`pytest_configure` registers them; :data:`MARKED_FILES` and
:data:`MARKED_TESTS` say which tests carry them): ``make test-fast`` deselects ``slow``,
the tests of the optional parts that start something big (a Flower deployment, a Ray
cluster, a browser, a notebook build) and the long runs of the core; ``pytest -m flower``
(``ray``, ``gpu``, ``browser``, ``notebooks``) runs one such part alone. Every test with
one of those markers is also ``slow``.

Scheduling (pytest-xdist, ``-n auto``): a notebook's cells share one kernel and run in
order: so each file goes whole to one worker, except the deployment tests, each of which
starts a federation of its own (free ports, its own folder) and waits on its timeouts.
xdist hands out the scopes with the most tests first; among equals, the federations and
then the notebooks come first.
"""

import pytest
from xdist.scheduler import LoadScopeScheduling

# what each marker says a test needs; every one of them implies ``slow``
PARTS = {
    "flower": "runs Flower for real: a SuperLink and SuperNodes as processes, or its simulation",
    "ray": "starts a Ray cluster",
    "gpu": "needs a CUDA device (skipped without one)",
    "browser": "drives a headless Chromium (skipped without one)",
    "notebooks": "builds or checks the notebooks: the book, the classroom editions, grading",
}
SLOW = "minutes of the suite: left out of make test-fast (-m 'not slow')"

# The tests marked here, each file (rootdir-relative) with the parts it needs: none for a
# file of the core that is only long. A GPU test marks itself (its module's ``gpu``).
MARKED_FILES = {
    "tests/deploy/test_flower_deploy.py": {"flower"},  # TLS deployments: minutes each
    "tests/deploy/test_silo_recovery.py": {"flower"},
    "tests/deploy/test_flower_sim.py": {"flower"},
    "tests/ray/test_ray_grid.py": {"ray"},
    "tests/notebooks/test_browser.py": {"browser"},
    "tests/notebooks/test_book.py": {"notebooks", "browser"},
    "tests/notebooks/test_classroom.py": {"notebooks"},
    "tests/notebooks/test_assessment.py": {"notebooks"},
    "tests/notebooks/test_stripped_notebooks.py": {"notebooks"},
    "tests/runs/test_verify.py": set(),  # reruns stored runs in fresh processes
    "tests/gpu/test_gpu_queue.py": set(),  # spawned workers, killed or out of time
}
# single tests, as (file, test, parts): the test is every parametrized case of a function,
# or one case by its full name
MARKED_TESTS = [
    (
        "tests/deploy/test_flower_sim.py",
        "test_flower_simulation_matches_the_local_engine[ray]",
        {"ray"},
    ),
    (
        "tests/training/test_engine.py",
        "test_hcct_finds_the_rotation_pairs_and_beats_both_extremes",
        set(),
    ),  # trains six schemes to the end
    (
        "tests/runs/test_canaries.py",
        "test_the_canaries_give_their_stored_numbers_bit_for_bit",
        set(),
    ),  # trains every canary
]

# files whose every test starts a federation (minutes each, much of it waiting on timeouts)
FEDERATION_FILES = {"tests/deploy/test_flower_deploy.py", "tests/deploy/test_silo_recovery.py"}


def pytest_configure(config):
    """Register the markers (``pytest --markers`` lists them); refuse a stale table entry.

    A file or test the tables name that is not there (moved, renamed) would leave its tests
    unmarked, in the fast lane: that stops the run, named.
    """
    config.addinivalue_line("markers", f"slow: {SLOW}")
    for name, needs in PARTS.items():
        config.addinivalue_line("markers", f"{name}: {needs}; slow too")
    named = [(f, None) for f in MARKED_FILES] + [(f, t) for f, t, _ in MARKED_TESTS]
    for file, test in named:
        path = config.rootpath / file
        if not path.is_file() or (test and f"def {test.split('[')[0]}(" not in path.read_text()):
            raise pytest.UsageError(
                f"conftest.py marks {file}{'::' + test if test else ''}, which is not there"
            )


def _file(nodeid: str) -> str:
    """The test file of a node id, relative to the rootdir (``tests/area/test_x.py``)."""
    return nodeid.split("::", 1)[0]


class FileScheduling(LoadScopeScheduling):
    """xdist's scope scheduling with a file (a federation test alone) as the scope."""

    def _split_scope(self, nodeid: str) -> str:
        path = _file(nodeid)
        # a federation test waits on its round timeouts: each is a scope of its
        # own, so they spread over the workers instead of queueing on one
        return nodeid if path in FEDERATION_FILES else path


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """Each worker takes whole files (:class:`FileScheduling`)."""
    return FileScheduling(config, log)


def _start_order(item) -> int:
    """0 for the federation files, 1 for a notebook, 2 for the rest."""
    if _file(item.nodeid) in FEDERATION_FILES:
        return 0
    return 1 if item.path.suffix == ".ipynb" else 2


def _mark(item) -> None:
    """Add the markers :data:`MARKED_FILES` and :data:`MARKED_TESTS` give ``item``.

    A test either names is ``slow``, and so is any test with a part's marker (``gpu``).
    """
    path = _file(item.nodeid)
    names = (getattr(item, "originalname", item.name), item.name)  # a notebook cell: name
    named = [p for f, t, p in MARKED_TESTS if f == path and t in names]
    if path in MARKED_FILES:
        named.append(MARKED_FILES[path])
    for part in sorted(set().union(*named)):
        item.add_marker(part)
    if named or any(item.get_closest_marker(part) for part in PARTS):
        item.add_marker("slow")


@pytest.hookimpl(tryfirst=True)  # marked before -m deselects
def pytest_collection_modifyitems(config, items):
    """Mark the tests (:func:`_mark`), then order them.

    The federations first, then the notebooks, then the rest (xdist then puts larger scopes
    first).
    """
    for item in items:
        _mark(item)
    # stable: each notebook's cells keep their order, and every worker sees the same order
    items.sort(key=_start_order)
