"""Suite-wide fixtures.

Private fits draw their noise from fresh OS entropy whatever ``random_state``
is. Tests that need fixed numbers (equality of two paths on the same noise,
doctests of exact values) opt in with the ``fixed_noise`` fixture, which
wraps the test in :func:`skprivreg.testing.reproducible_noise`; every other
test sees the library exactly as users do.
"""

import sys
import warnings
from pathlib import Path

import pytest

# The suite's helpers (``_privacy_harness``) import by name from any test module
# (the suite runs with --import-mode=importlib, which puts no test directory on
# the path).
sys.path.insert(0, str(Path(__file__).parent))

from skprivreg.testing import reproducible_noise


@pytest.fixture
def fixed_noise():
    """Reproducible noise for this test (the testing facility; warns once)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with reproducible_noise(0):
            yield


@pytest.fixture(scope="module")
def client():
    """A LocalCluster of two single-threaded worker processes, one per test module."""
    distributed = pytest.importorskip("distributed")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cluster = distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
        )
        with distributed.Client(cluster) as dask_client:
            yield dask_client
        cluster.close()
