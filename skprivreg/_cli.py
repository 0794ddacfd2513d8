"""``python -m skprivreg demo | plan <estimator> ...``.

``demo`` fits every estimator on simulated data (or data shipped with
scikit-learn) and prints a table against the non-private fit and the mean
predictor. ``plan`` prints public planning numbers for given (n, d, epsilon,
delta) and never touches data.
"""

import argparse
import importlib
import math
import sys
import time
import warnings

import numpy as np

# name -> "module:function" with signature ``function(argv) -> int``
PLANNERS = {
    "adassp": "skprivreg.linear_model._commands:plan_adassp",
    "ssp": "skprivreg.linear_model._commands:plan_ssp",
    "lba": "skprivreg.label_dp._cli_lba:plan_command",
    "reusecov": "skprivreg.linear_model._commands:plan_reusecov",
    "issp": "skprivreg.linear_model._issp_cli:plan_command",
    "lasso": "skprivreg.feature_selection._lasso_cli:plan_command",
}

# modules exposing ``demo_case()`` (or ``demo_cases()``), in table order
DEMO_MODULES = [
    "skprivreg.linear_model._commands",
    "skprivreg.linear_model._issp_cli",
    "skprivreg.label_dp._cli_lba",
    "skprivreg.feature_selection._lasso_cli",
]


def _demo_cases():
    for module_name in DEMO_MODULES:
        module = importlib.import_module(module_name)
        cases = module.demo_cases() if hasattr(module, "demo_cases") else [module.demo_case()]
        for case in cases:
            yield case
            if "baseline" in case:
                # The baseline users should compare against, on the same data.
                baseline = case["baseline"]
                yield {**case, "name": f"  baseline: {type(baseline).__name__}",
                       "estimator": baseline}


def _score_row(case):
    from sklearn.base import clone, is_regressor
    from sklearn.linear_model import LinearRegression

    estimator = case["estimator"]
    X_train, y_train = case["X_train"], case["y_train"]
    X_test, y_test = case["X_test"], case["y_test"]
    start = time.perf_counter()
    with warnings.catch_warnings():
        # Clipping warnings are expected on simulated heavy-ish tails.
        warnings.simplefilter("ignore")
        fitted = clone(estimator).fit(X_train, y_train)
    seconds = time.perf_counter() - start
    ledger = getattr(fitted, "privacy_spent_", None)
    if is_regressor(fitted):
        y_pred = fitted.predict(X_test)
    else:  # a selector: score the non-private OLS refit on its output
        y_pred = (
            LinearRegression().fit(fitted.transform(X_train), y_train)
            .predict(fitted.transform(X_test))
            if fitted.transform(X_train).shape[1]
            else np.full_like(y_test, y_train.mean(), dtype=float)
        )
    reference = case.get("reference", LinearRegression()).fit(X_train, y_train)
    mse = float(np.mean((y_test - y_pred) ** 2))
    mse_ref = float(np.mean((y_test - reference.predict(X_test)) ** 2))
    mse_mean = float(np.mean((y_test - np.mean(y_train, axis=0)) ** 2))
    return {
        "case": case["name"],
        "notion": case["notion"],
        "epsilon": ledger.epsilon if ledger is not None else math.nan,
        "delta": ledger.delta if ledger is not None else math.nan,
        "mse": mse,
        "mse_nonprivate": mse_ref,
        "mse_mean": mse_mean,
        "r2": 1.0 - mse / mse_mean,
        "seconds": seconds,
    }


def demo(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m skprivreg demo",
        description="Fit every skprivreg estimator and compare with the non-private fit.",
    )
    parser.parse_args(argv)
    header = (
        f"{'case':<54}{'notion':<8}{'epsilon':>8}{'delta':>9}{'test MSE':>11}"
        f"{'non-priv':>10}{'mean':>9}{'R2':>7}{'fit s':>8}"
    )
    print(header)
    print("-" * len(header))
    for case in _demo_cases():
        row = _score_row(case)
        print(
            f"{row['case'][:53]:<54}{row['notion']:<8}{row['epsilon']:>8.3g}{row['delta']:>9.1e}"
            f"{row['mse']:>11.4g}{row['mse_nonprivate']:>10.4g}{row['mse_mean']:>9.4g}"
            f"{row['r2']:>10.3g}{row['seconds']:>8.2f}"
        )
    print(
        "\nMSE on held-out data; 'non-priv' is the non-private fit of the same model, "
        "'mean' predicts the training mean.\nepsilon/delta are the totals recorded in "
        "each fit's privacy_spent_."
    )
    return 0


def plan(argv):
    if not argv or argv[0] in ("-h", "--help"):
        print(
            "usage: python -m skprivreg plan {" + ",".join(sorted(PLANNERS)) + "} [options]\n"
            "Prints public planning numbers (noise scales, minimum n, ...); touches no data."
        )
        return 0 if argv else 2
    name, rest = argv[0], argv[1:]
    if name not in PLANNERS:
        print(f"unknown estimator {name!r}; choose from {sorted(PLANNERS)}", file=sys.stderr)
        return 2
    module_name, function = PLANNERS[name].split(":")
    return getattr(importlib.import_module(module_name), function)(rest)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv or argv[0] in ("-h", "--help"):
        print("usage: python -m skprivreg {demo,plan} ...")
        return 0 if argv else 2
    command, rest = argv[0], argv[1:]
    if command == "demo":
        return demo(rest)
    if command == "plan":
        return plan(rest)
    print(f"unknown command {command!r}; use 'demo' or 'plan'", file=sys.stderr)
    return 2
