"""Zeus and CodeCarbon parity of the Python Meter (issue 29, section 4), on the stand-in NVML:
a GPU asked for that cannot be read is an error (or, strict=False, a flag in every
measurement), energy per device (m.gpu_energy_j[0]), a power timeline per device, and carbon
per domain."""

import time

import pytest

import greentrain


def test_gpu_asked_for_without_nvml_is_an_error(env, tmp_path):
    env.setenv("GT_NVML_LIBRARY", str(tmp_path / "no-libnvidia-ml.so"))
    with pytest.raises(greentrain.Error, match=r"gpus \[0\]: no GPU can be read \(nvml: .*"
                       r"strict=False"):
        greentrain.Meter(gpus=[0], interval_ms=0)
    # strict=False: the CPU figures, and a flag in every measurement naming what is missing
    with greentrain.Meter(gpus=[0], interval_ms=0, strict=False) as meter:
        assert any("gpus [0] asked for but not measured" in f for f in meter.flags)
        for name in ("a", "b"):
            meter.begin_window(name)
            m = meter.end_window(name)
            assert any("gpus [0] asked for but not measured" in f and "no-libnvidia-ml" in f
                       for f in m.flags), m.flags
            assert m.gpu_energy_j == {}
            assert m.energy_j is not None  # the CPU and memory estimates
    # all visible GPUs (None) on a machine with none: no error, no flag (nothing was asked)
    with greentrain.Meter(interval_ms=0) as meter:
        assert meter.flags == []


def test_gpu_that_cannot_be_read_is_an_error(fake_nvml, env):
    env.setenv("FAKE_NVML_DEVICES", "2")
    env.setenv("FAKE_NVML_NO_ENERGY", "1")
    env.setenv("FAKE_NVML_NO_POWER", "1")
    with pytest.raises(greentrain.Error, match=r"GPU 1 \(nvml:1\) cannot be read"):
        greentrain.Meter(gpus=[0, 1], cpu=False, interval_ms=0)
    with greentrain.Meter(gpus=[0, 1], cpu=False, interval_ms=0, strict=False) as meter:
        meter.begin_window("w")
        m = meter.end_window("w")
    assert list(m.gpu_energy_j) == [0]
    assert any("GPU 1 (nvml:1) cannot be read" in f for f in m.flags)


def test_energy_and_carbon_per_device(fake_nvml, env):
    env.setenv("FAKE_NVML_DEVICES", "2")
    env.setenv("FAKE_NVML_POWER_MW", "100000,300000")
    with greentrain.Meter(cpu=True, interval_ms=20, carbon=400.0) as meter:
        meter.begin_window("w")
        time.sleep(0.3)
        m = meter.end_window("w")
        assert [s.index for s in meter.sensors() if s.domain == "gpu" and s.available] == [0, 1]
    assert sorted(m.gpu_energy_j) == [0, 1]
    assert m.gpu_energy_j[0] == pytest.approx(100 * m.duration_s, rel=0.05)
    assert m.gpu_energy_j[1] == pytest.approx(300 * m.duration_s, rel=0.05)
    assert list(m.cpu_energy_j) == [0] and list(m.ram_energy_j) == [0]  # machine-wide estimates
    by = m.g_co2e_by_domain
    assert set(by) == {"gpu", "cpu", "ram"}
    assert by["gpu"] == pytest.approx(sum(m.gpu_energy_j.values()) / 3.6e6 * 400, rel=1e-6)
    assert sum(by.values()) == pytest.approx(m.g_co2e, rel=1e-9)
    d = {x.index: x for x in m.domains if x.domain == "gpu"}
    assert d[1].g_co2e == pytest.approx(d[1].energy_j / 3.6e6 * 400, rel=1e-6)
    assert m.to_dict()["g_co2e_by_domain"] == by


def test_power_now_and_timeline(fake_nvml, env):
    env.setenv("FAKE_NVML_DEVICES", "2")
    env.setenv("FAKE_NVML_POWER_MW", "100000,250000")
    with greentrain.Meter(cpu=False, interval_ms=20) as meter:
        meter.begin_window("w")
        time.sleep(0.6)
        m = meter.end_window("w")
        now = meter.power_w()
        assert now[0] == pytest.approx(100, rel=0.05) and now[1] == pytest.approx(250, rel=0.05)
        tl = meter.window_timeline(m)
        assert sorted(tl) == [0, 1]
        for idx, watts in ((0, 100), (1, 250)):
            pts = tl[idx]
            # spans of >= 100 ms (the counter's refresh period) over a 0.6 s window
            assert 3 <= len(pts) <= 7, pts
            ts = [t for t, _ in pts]
            assert ts == sorted(ts)
            assert m.start_unix_s < ts[0] and ts[-1] <= m.start_unix_s + m.duration_s + 1e-3
            for _, w in pts:
                assert w == pytest.approx(watts, rel=0.1)
        everything = meter.power_timeline(domain=None)
        assert set(everything) == {"gpu:0", "gpu:1"}
        assert len(everything["gpu:0"]) >= len(tl[0])
        later = meter.power_timeline(start_unix_s=time.time() + 10)
        assert later == {0: [], 1: []}
    with greentrain.Meter(cpu=False, interval_ms=20, timeline_points=2) as meter:
        time.sleep(0.5)
        assert len(meter.power_timeline()[0]) == 2  # the newest two


def test_carbon_as_a_country_or_a_published_file(fake_nvml, tmp_path):
    with greentrain.Meter(cpu=False, interval_ms=0, carbon="DEU") as meter:
        assert meter.country == ("DEU", "Germany")
        meter.begin_window("w")
        time.sleep(0.12)
        m = meter.end_window("w")
    assert m.g_co2e == pytest.approx(m.energy_j / 3.6e6 * 365.477, rel=1e-6)
    row = m.to_codecarbon_row()
    assert (row["country_iso_code"], row["country_name"]) == ("DEU", "Germany")
    with pytest.raises(greentrain.Error, match=r"unknown country code 'DEX'.*DEU \(Germany\)"):
        greentrain.Meter(cpu=False, carbon="DEX")
    uk = tmp_path / "uk.json"
    uk.write_text('{"data":[{"from":"2018-01-20T12:00Z","to":"2018-01-20T12:30Z",'
                  '"intensity":{"forecast":266,"actual":null,"index":"moderate"}},'
                  '{"from":"2018-01-20T12:30Z","to":"2018-01-20T13:00Z",'
                  '"intensity":{"forecast":270,"actual":null,"index":"moderate"}}]}')
    with greentrain.Meter(cpu=False, interval_ms=0, carbon=uk, carbon_value="forecast",
                          country="GBR") as meter:
        assert "uk-carbon-intensity intensity.forecast" in meter.carbon_source
        assert meter.country == ("GBR", "United Kingdom")
    with pytest.raises(greentrain.Error, match="no actual values"):
        greentrain.Meter(cpu=False, carbon=uk, carbon_value="actual")
