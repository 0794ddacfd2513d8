import numpy as np
import pytest

from skprivreg.datasets import make_linear_regression


def test_shapes_and_reproducibility():
    X, y, coef = make_linear_regression(500, 4, random_state=0, return_coef=True)
    assert X.shape == (500, 4) and y.shape == (500,) and coef.shape == (4,)
    X2, y2 = make_linear_regression(500, 4, random_state=0)
    np.testing.assert_array_equal(X, X2)
    np.testing.assert_array_equal(y, y2)
    _, Y, coefs = make_linear_regression(100, 3, n_outputs=5, random_state=1, return_coef=True)
    assert Y.shape == (100, 5) and coefs.shape == (5, 3)


@pytest.mark.parametrize("condition_number", [1.0, 1e3, 1e6])
def test_condition_number_of_the_population_covariance(condition_number):
    X, _ = make_linear_regression(200_000, 5, condition_number=condition_number, random_state=2)
    eig = np.linalg.eigvalsh(X.T @ X / X.shape[0])
    # sample covariance of 2e5 rows: each eigenvalue within a few percent
    assert eig.max() / eig.min() == pytest.approx(condition_number, rel=0.05)


def test_noise_level():
    X, y, coef = make_linear_regression(100_000, 3, noise=2.0, intercept=1.5,
                                        random_state=3, return_coef=True)
    resid = y - X @ coef - 1.5
    assert np.var(resid) == pytest.approx(4.0, rel=0.02)
