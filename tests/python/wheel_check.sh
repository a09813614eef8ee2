#!/usr/bin/env bash
# The wheel, as a user without network installs it (issue 29): packs it from the build tree
# (scripts/make_wheel.py), installs it into a fresh venv with pip --no-index (no PyPI), runs the
# `greentrain` console entry point (`--version`, `measure -- true`), and runs the Python tests
# against the installed package (the venv sees Debian's python3-pytest and python3-torch).
#   wheel_check.sh BUILD_DIR FAKE_NVML_LIB PYTHON
set -euo pipefail
build="$1" fake_nvml="$2" py="$3"
src="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
"$py" "$src/scripts/make_wheel.py" "$build" "$tmp/dist"
base="$("$py" -c 'import sys; print(sys.base_prefix)')/bin/python3"
"$base" -m venv --system-site-packages "$tmp/venv"
PIP_NO_INDEX=1 "$tmp/venv/bin/python" -m pip --disable-pip-version-check -q install --no-index \
  "$tmp"/dist/greentrain-*.whl
"$tmp/venv/bin/greentrain" --version
"$tmp/venv/bin/greentrain" measure -- true
cd "$tmp"
"$tmp/venv/bin/python" -I -c 'import greentrain, sys; assert greentrain.__file__.startswith(sys.prefix), greentrain.__file__; print("imported", greentrain.__file__)'
# Every test file of tests/python is run here but two (test_test_lists.py checks this list):
# not run here: test_frameworks.py (the frameworks are in build/venv, not beside Debian's python)
# not run here: test_daemon.py (it starts the build tree's program, GT_TEST_PROGRAM)
t="$src/tests/python"
env -u PYTHONPATH GT_TEST_FAKE_NVML="$fake_nvml" "$tmp/venv/bin/python" -m pytest -q \
  -p no:cacheprovider -rs "$t/test_meter.py" "$t/test_meter_args.py" "$t/test_optimizer.py" \
  "$t/test_integrations.py" "$t/test_unknown_totals.py" "$t/test_parity.py" "$t/test_test_lists.py"
