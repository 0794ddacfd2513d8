"""The Examples sections of the public docstrings run and print what they show.

Each example prints public facts only (shapes, event names, declared or
calibrated numbers), never a noisy value, so its output is fixed although
every fit draws fresh noise.
"""

import doctest
import importlib
import inspect

import pytest

MODULES = [
    "skprivreg",
    "skprivreg.accounting",
    "skprivreg.linear_model",
    "skprivreg.label_dp",
    "skprivreg.feature_selection",
    "skprivreg.preprocessing",
    "skprivreg.model_selection",
    "skprivreg.pipeline",
]


def _public_objects():
    seen = {}
    for module_name in MODULES:
        module = importlib.import_module(module_name)
        for name in getattr(module, "__all__", []):
            obj = getattr(module, name)
            if (inspect.isclass(obj) or inspect.isfunction(obj)) and id(obj) not in seen:
                seen[id(obj)] = (f"{module_name}.{name}", obj)
    return sorted(seen.values(), key=lambda item: item[0])


def _examples(obj):
    finder = doctest.DocTestFinder(recurse=False)
    return [test for test in finder.find(obj) if test.examples]


CASES = [(name, obj) for name, obj in _public_objects() if _examples(obj)]


def test_the_public_docstrings_have_examples():
    assert len(CASES) >= 15


@pytest.mark.parametrize("name, obj", CASES, ids=[name for name, _ in CASES])
def test_docstring_example_runs_and_prints_what_it_shows(name, obj):
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    for test in _examples(obj):
        runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{name}: {result.failed} of {result.attempted} examples failed"
