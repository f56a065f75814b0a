"""Fixtures shared by test files: one local Ray cluster for the whole session (the ray backend's
tests and the search's Ray test use the same one: starting a second cluster in one process was
where a loaded CI machine timed out waiting for Ray's GCS)."""

from __future__ import annotations

import os
import tempfile

import pytest


@pytest.fixture(scope="session")
def ray_cluster():
    """A local Ray cluster with a custom "TPU" resource (no TPU: workers run on CPU), HOME and Ray's
    temp folder under a short temporary folder (Ray's socket paths must fit 107 bytes). Its start is
    tried twice: on two busy cores Ray's GCS can miss its start-up deadline once."""
    ray = pytest.importorskip("ray", reason="the ray extra is not installed (pip install 'pallasite[ray]')")
    home = tempfile.mkdtemp(prefix="plsray")
    for attempt in (1, 2):
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("HOME", home)
            mp.delenv("RAY_ADDRESS", raising=False)
            try:
                ray.init(num_cpus=2, resources={"TPU": 1}, include_dashboard=False, log_to_driver=False,
                         _temp_dir=os.path.join(home, f"r{attempt}"))
                break
            except RuntimeError:
                ray.shutdown()
                if attempt == 2:
                    raise
    try:
        yield home
    finally:
        ray.shutdown()


RAY_FILES = ("test_ray_backend.py", "test_search_ray.py", "test_ray_pool.py")


def work_unit(nodeid: str) -> str:
    """The unit ``-n 2 --dist loadgroup`` sends whole to one test process: the test's file, or "ray" for
    the Ray files (``ray_cluster`` is session-scoped per process: two clusters on two cores missed Ray's
    start-up deadline)."""
    path = nodeid.split("::", 1)[0]
    return "ray" if path.rsplit("/", 1)[-1] in RAY_FILES else path


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """Under pytest-xdist's ``--dist loadgroup``: each test file runs whole on one process, so its
    module-scoped warm workers, engines and judged candidates are made once. xdist's own grouping (the
    ``xdist_group`` mark) suffixes ``item._nodeid``, which pytest 9.2 no longer reads: every test of a
    file was sent on its own, a module fixture made on both processes and again each time the files
    interleaved. This scheduler reads the unit from the test's file instead, so it holds whatever the
    marks do."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class FileUnits(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return work_unit(nodeid)

    return FileUnits(config, log)
