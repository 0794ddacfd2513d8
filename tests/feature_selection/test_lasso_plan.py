"""lasso_plan: public planning numbers as a frozen object whose text the CLI prints."""

import dataclasses
import math

import pytest

from skprivreg.feature_selection import LassoPlan, lasso_plan


def test_plan_numbers_match_the_closed_forms():
    plan = lasso_plan(n_samples=100_000, n_features=30, epsilon=1.0, delta=1e-6, n1=150)
    q = 1.0 / (32 * math.log(1e6))
    assert isinstance(plan, LassoPlan)
    assert plan.subsample_rate == pytest.approx(q)
    assert (plan.n_subsamples, plan.max_appearances) == (1000, math.floor(2 * 1000 * q))
    assert plan.threshold == pytest.approx(math.log(1e6))
    assert plan.max_distance == pytest.approx(1000 / (2 * 4) - 1)
    assert plan.recorded_delta == 5e-7
    assert plan.rows_per_subsample == pytest.approx(100_000 * q)
    assert plan.rough_n_poisson == pytest.approx(150 / q)
    assert plan.rough_n_partition == pytest.approx(75 / q)
    assert plan.warnings == ()
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.epsilon = 2.0


def test_plan_text_and_warnings():
    plan = lasso_plan(n_samples=1000, epsilon=1.0, delta=1e-3, sampling="partition",
                      max_features=2, rsc_constant=0.25)
    text = str(plan)
    assert "threshold T = ln(1/delta)/eps" in text and "partition" in text
    assert "Lambda must exceed 16 s^2/Psi" in text and "256" in text
    assert "delta > 1/(10 n)" in text
    assert len({len(line) - len(line.lstrip()) for line in text.splitlines()}) == 1


def test_plan_is_keyword_only_and_refuses_bad_rates():
    with pytest.raises(TypeError):
        lasso_plan(1000)
    with pytest.raises(ValueError, match="subsampling rate"):
        lasso_plan(epsilon=1.0, subsample_rate=1.5)
