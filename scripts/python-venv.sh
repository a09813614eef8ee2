#!/usr/bin/env bash
# Makes the virtual environment the Python tests and benchmarks run in, and installs the
# greentrain package into it with `pip install .` (scikit-build-core + nanobind, from PyPI).
#   scripts/python-venv.sh [VENV]      (default: build/venv, which CMake finds by itself)
# The venv sees Debian's system packages (python3-torch 1.13, numpy), so no multi-GB PyTorch
# download is needed; transformers and accelerate are pinned to versions that work with it
# (a few tens of MB). The framework tests (tests/python/test_frameworks.py) add tensorboardX
# (TensorBoard's event files, ~0.1 MB), mlflow-skinny (MLflow's tracking client and local
# store, ~5 MB, no server) and Lightning 2.2 (the last line that supports PyTorch 1.13); Lightning,
# its utilities and torchmetrics are installed without their dependencies, which would otherwise
# replace Debian's PyTorch 1.13 by a 2 GB PyTorch 2 with CUDA. Needs the Debian packages
# python3-venv and python3-dev.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
venv="${1:-build/venv}"
py="${GT_VENV_PYTHON:-/usr/bin/python3}"
if [ ! -x "$venv/bin/python" ]; then
  "$py" -m venv --system-site-packages "$venv"
fi
pip=("$venv/bin/python" -m pip --disable-pip-version-check -q)
"${pip[@]}" install "pytest==9.2.0" "nanobind==3.1.0" "scikit-build-core==1.1.2" \
  "transformers==4.44.2" "accelerate==0.33.0" "tensorboardX==2.6.2.2" "mlflow-skinny==2.13.2" \
  "packaging>=24"
"${pip[@]}" install --no-deps "lightning==2.2.5" "lightning-utilities==0.11.9" "torchmetrics==1.4.3"
# The package itself, built from this checkout (its C++ compiled in parallel).
CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" "${pip[@]}" install --no-build-isolation .
echo "greentrain: Python environment ready in $venv"
