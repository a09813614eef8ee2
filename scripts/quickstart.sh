#!/usr/bin/env bash
# greentrain's first command on a fresh Debian 12 machine: installs the packages, builds in
# Release, prepares real English text, trains the quickstart GPT while measuring energy,
# then prints a sample. Re-running it starts a new run folder.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
cmake --build build -j"$(nproc)"
bash scripts/prepare-text.sh data/fortunes.txt
run="runs/quickstart-$(date +%Y%m%d-%H%M%S)"
./build/src/cli/greentrain train configs/quickstart.toml --out "$run" "$@"
echo
echo "=== a sample from $run ==="
./build/src/cli/greentrain sample "$run" --tokens 400 --temperature 0.8
echo
echo "Run folder: $run (metrics.jsonl, summary.json, energy.csv, checkpoint/)"
echo "Report (open it in a browser, works offline): $run/report.html"
