"""Simulators used by the demo, the examples and the benchmarks."""

from ._simulated import make_linear_regression

__all__ = ["make_linear_regression"]
