#!/usr/bin/env bash
# bench/setup-torch2.sh [VENV]: PyTorch 2.x from PyPI in a virtual environment (default
# ../venv-torch2, outside the repository), for bench/bench_precision.py --compile. The Linux
# wheel pulls the CUDA runtime packages (about 5 GB in all) even on a CPU-only machine.
set -euo pipefail
venv="${1:-$(cd "$(dirname "$0")/../.." && pwd)/venv-torch2}"
python3 -m venv "$venv"
"$venv/bin/pip" install --upgrade pip
"$venv/bin/pip" install torch numpy
"$venv/bin/python" -c 'import torch; print("PyTorch", torch.__version__, "in", torch.__file__)'
echo "run: $venv/bin/python bench/bench_precision.py --compile [--precision fp32]"
