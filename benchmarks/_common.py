"""Helpers shared by the benchmark scripts: machine description and result files."""

import json
import os
import platform
import sys
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"
#: Pause before each timed call (seconds). After a multi-threaded call,
#: OpenBLAS's worker threads keep spinning for about 0.1 s (its thread
#: timeout, 2^28 cycles); a call that starts at once shares the cores with
#: them. The pause lets every timed call, floor included, start alike.
SETTLE_SECONDS = 0.3


def settle():
    """Wait :data:`SETTLE_SECONDS` so the next timed call starts on idle cores."""
    time.sleep(SETTLE_SECONDS)


def machine():
    import numpy
    import scipy
    import sklearn

    return {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "numpy": numpy.__version__,
        "scipy": scipy.__version__,
        "scikit-learn": sklearn.__version__,
    }


def write_results(name, payload, markdown):
    """Write ``results/<name>.json`` and ``results/<name>.md``."""
    RESULTS.mkdir(exist_ok=True)
    payload = {"machine": machine(), **payload}
    (RESULTS / f"{name}.json").write_text(json.dumps(payload, indent=2, default=float))
    (RESULTS / f"{name}.md").write_text(markdown)
    return RESULTS / f"{name}.md"
