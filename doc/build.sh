#!/usr/bin/env bash
# Build the HTML documentation with warnings as errors. Installs nothing:
# run `pip install -e .[docs]` first. Needs no network.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export MPLBACKEND=Agg
export PYTHONHASHSEED=0
# Keep the examples on the cores CI has; they are small.
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}" OPENBLAS_NUM_THREADS="${OPENBLAS_NUM_THREADS:-1}"
sphinx-build -W --keep-going -b html doc doc/_build/html "$@"
