"""Every test file of tests/python is run: by ctest (GT_PYTEST_FILES in CMakeLists.txt) and
against the installed wheel (wheel_check.sh), or named in wheel_check.sh as not run there with
its reason. The wheel check had not run test_meter_args.py and test_unknown_totals.py, added
after it was written."""

import pathlib
import re

HERE = pathlib.Path(__file__).resolve().parent


def files():
    return sorted(p.name for p in HERE.glob("test_*.py"))


def test_ctest_runs_every_test_file():
    text = (HERE / "CMakeLists.txt").read_text()
    listed = re.search(r"set\(GT_PYTEST_FILES([^)]*)\)", text)
    assert listed, "GT_PYTEST_FILES not found in tests/python/CMakeLists.txt"
    assert sorted(listed.group(1).split()) == files()


def test_wheel_check_runs_every_test_file_or_says_why_not():
    lines = (HERE / "wheel_check.sh").read_text().splitlines()
    skipped = {m.group(1) for line in lines
               for m in [re.match(r"# not run here: (test_\w+\.py) \(.+\)", line)] if m}
    run = {name for line in lines if not line.startswith("#")
           for name in re.findall(r"/(test_\w+\.py)", line)}
    assert not run & skipped, run & skipped
    missing = [f for f in files() if f not in run | skipped]
    assert not missing, f"wheel_check.sh neither runs nor names {missing}"
