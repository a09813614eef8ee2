"""Fixtures of the Python package's tests: the stand-in NVML of the C++ tests
(tests/energy/fake_nvml.cpp, path in $GT_TEST_FAKE_NVML, set by ctest), an empty or fake
powercap tree, and private lock folders. Environment changes are undone after each test."""

import os
import pathlib

import pytest


@pytest.fixture
def env(monkeypatch, tmp_path):
    """A clean energy environment: no RAPL, private locks; returns monkeypatch."""
    for k in list(os.environ):
        if k.startswith("FAKE_NVML_") or k in ("CUDA_VISIBLE_DEVICES", "GT_NVML_LIBRARY"):
            monkeypatch.delenv(k, raising=False)
    (tmp_path / "powercap").mkdir()
    monkeypatch.setenv("GT_POWERCAP_ROOT", str(tmp_path / "powercap"))
    monkeypatch.setenv("GT_ENERGY_LOCK_DIR", str(tmp_path / "locks"))
    return monkeypatch


@pytest.fixture
def fake_nvml(env, tmp_path):
    """The stand-in NVML: one GPU drawing 150 W, limits 100..400 W (300 W at start), every set
    logged to tmp/set.log, limits kept in tmp/limits (as a driver keeps them)."""
    lib = os.environ.get("GT_TEST_FAKE_NVML")
    if not lib or not pathlib.Path(lib).exists():
        pytest.fail("GT_TEST_FAKE_NVML is not set to the stand-in NVML library; run these tests "
                    "through ctest (ctest --test-dir build -R python_)")
    env.setenv("GT_NVML_LIBRARY", lib)
    env.setenv("FAKE_NVML_DEVICES", "1")
    env.setenv("FAKE_NVML_POWER_MW", "150000")
    env.setenv("FAKE_NVML_LIMIT_MW", "300000")
    env.setenv("FAKE_NVML_SET_LOG", str(tmp_path / "set.log"))
    env.setenv("FAKE_NVML_LIMIT_FILE", str(tmp_path / "limits"))
    (tmp_path / "limits").write_text("300000\n")
    return FakeNvml(tmp_path)


class FakeNvml:
    def __init__(self, d):
        self.dir = d

    def limit_mw(self):
        """The limit in force now (mW)."""
        return int((self.dir / "limits").read_text().split()[0])

    def sets(self):
        """Every SetPowerManagementLimit call: (mW, rc)."""
        p = self.dir / "set.log"
        if not p.exists():
            return []
        return [(int(l.split()[1]), int(l.split()[2])) for l in p.read_text().splitlines()]

    def changes(self):
        """The limits set that differed from the one in force (mW): NVML's permission probe
        sets the limit in force to itself, which changes nothing."""
        out, cur = [], 300000
        for mw, rc in self.sets():
            if rc == 0 and mw != cur:
                out.append(mw)
                cur = mw
        return out
