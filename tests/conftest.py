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


def pytest_collection_modifyitems(config, items):
    """Under pytest-xdist (``-n 2 --dist loadgroup``): each test file runs whole on one process, so its
    module-scoped warm workers start once; the Ray files share one process, and so one local cluster
    (``ray_cluster`` is session-scoped per process: two clusters on two cores missed Ray's start-up
    deadline)."""
    for item in items:
        name = item.path.name
        item.add_marker(pytest.mark.xdist_group("ray" if name in RAY_FILES else name))
