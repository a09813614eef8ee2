#!/usr/bin/env bash
# Builds greentrain's wheel: the Python package, its extension module and the `greentrain`
# program (a console entry point), into dist/ (or OUT_DIR).
#   bash scripts/wheel.sh [OUT_DIR]          (default: dist)
# It packs what the CMake build in $GT_BUILD_DIR (default: build) has built, building the two
# targets it needs there first (configured as README.md says, when that folder has no build
# yet). Needs no network: install the wheel on a machine without one with
#   pip install --no-index dist/greentrain-*.whl
# The program links the Debian packages of scripts/apt-packages.txt (install them with
# scripts/install-deps.sh where the wheel goes); the wheel is tagged for this Python and machine.
# The default build compiles for this machine's CPU (GT_NATIVE=ON, -march=native): for a wheel
# that runs on other x86-64 CPUs, pack a build configured with -DGT_NATIVE=OFF, e.g.
#   cmake -S . -B build-portable -DGT_NATIVE=OFF && GT_BUILD_DIR=build-portable bash scripts/wheel.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
out="${1:-dist}"
build="${GT_BUILD_DIR:-build}"
py="${GT_PYTHON:-}"
if [ -z "$py" ]; then
  if [ -x "$build/venv/bin/python" ]; then py="$build/venv/bin/python"; else py=/usr/bin/python3; fi
fi
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DGT_PYTHON="$py" >/dev/null
fi
cmake --build "$build" -j"$(nproc)" --target greentrain greentrain_core >/dev/null
"$py" scripts/make_wheel.py "$build" "$out"
