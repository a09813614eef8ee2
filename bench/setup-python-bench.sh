#!/usr/bin/env bash
# bench/setup-python-bench.sh [VENV]: the venv of bench/python_overhead.py (default
# build/bench-venv): Debian's Python with its system packages, Zeus and CodeCarbon from PyPI.
# greentrain itself comes from the build tree (PYTHONPATH=build/python), so the bench measures
# the module just built.
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${1:-build/bench-venv}"
[ -x "$venv/bin/python" ] || /usr/bin/python3 -m venv --system-site-packages "$venv"
"$venv/bin/python" -m pip install -q "zeus==0.16.0" "codecarbon==3.3.2"
echo "run: PYTHONPATH=build/python $venv/bin/python bench/python_overhead.py --program build/src/cli/greentrain --fake-nvml build/tests/energy/libfake_nvml.so"
