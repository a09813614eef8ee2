#!/usr/bin/env bash
# Makes the virtual environment the Python tests and benchmarks run in, and installs the
# greentrain package into it with `pip install .` (scikit-build-core + nanobind, from PyPI).
#   scripts/python-venv.sh [VENV]      (default: build/venv, which CMake finds by itself)
# The venv sees Debian's system packages (python3-torch 1.13, numpy), so no multi-GB PyTorch
# download is needed; transformers and accelerate are pinned to versions that work with it
# (a few tens of MB). Needs the Debian packages python3-venv and python3-dev.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
venv="${1:-build/venv}"
py="${GT_VENV_PYTHON:-/usr/bin/python3}"
if [ ! -x "$venv/bin/python" ]; then
  "$py" -m venv --system-site-packages "$venv"
fi
pip=("$venv/bin/python" -m pip --disable-pip-version-check -q)
"${pip[@]}" install "pytest==9.2.0" "nanobind==3.1.0" "scikit-build-core==1.1.2" \
  "transformers==4.44.2" "accelerate==0.33.0"
# The package itself, built from this checkout (its C++ compiled in parallel).
CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" "${pip[@]}" install --no-build-isolation .
echo "greentrain: Python environment ready in $venv"
