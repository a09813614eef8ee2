"""The Meter from Python, on the stand-in NVML (one GPU at a constant 150 W): window energy,
nesting and overlap, flags and unknowns, the context manager and decorator, sensors, dicts
and CodeCarbon rows."""

import csv
import json
import time

import pytest

import greentrain

W = 150.0  # the stand-in GPU's power (W)


def gpu_meter(**kw):
    kw.setdefault("cpu", False)
    kw.setdefault("interval_ms", 20)
    return greentrain.Meter(**kw)


def test_window_energy_is_power_times_time(fake_nvml):
    with gpu_meter(carbon=100.0) as meter:
        meter.begin_window("w")
        time.sleep(0.3)
        m = meter.end_window("w")
    assert isinstance(m, greentrain.Measurement)
    assert 0.3 <= m.duration_s < 0.6  # sleep overshoots on a loaded machine
    assert m.energy_j == pytest.approx(W * m.duration_s, rel=0.03)
    assert m.avg_power_w == pytest.approx(W, rel=0.03)
    assert m.peak_power_w >= m.avg_power_w * 0.97
    # carbon is integrated per sampling interval on the unix clock (1e9 s: ~1e-7 s steps)
    assert m.g_co2e == pytest.approx(m.energy_j / 3.6e6 * 100.0, rel=1e-4)
    assert not m.estimated and m.unknown == {}
    [d] = m.domains
    assert (d.sensor, d.domain, d.method) == ("nvml:0", "gpu", "counter")
    assert m.energy_j_of("gpu") == pytest.approx(m.energy_j)
    assert m.energy_j_of("cpu") is None
    assert "100 gCO2e/kWh" in m.carbon_source


def test_windows_nest_and_overlap(fake_nvml):
    with gpu_meter() as meter:
        meter.begin_window("outer")
        time.sleep(0.15)
        meter.begin_window("inner")
        time.sleep(0.15)
        outer = meter.end_window("outer")  # overlapping: outer ends first
        time.sleep(0.15)
        inner = meter.end_window("inner")
    assert 0.3 <= outer.duration_s < 0.6 and 0.3 <= inner.duration_s < 0.6
    assert outer.start_unix_s < inner.start_unix_s
    for m in (outer, inner):
        assert m.energy_j == pytest.approx(W * m.duration_s, rel=0.05)
    with gpu_meter() as meter:
        meter.begin_window("a")
        with pytest.raises(greentrain.Error, match="already open"):
            meter.begin_window("a")
        with pytest.raises(greentrain.Error, match="not open"):
            meter.end_window("b")


def test_short_window_power_is_unknown_with_reason(fake_nvml):
    with gpu_meter(interval_ms=0) as meter:
        meter.begin_window("short")
        m = meter.end_window("short")
    assert m.avg_power_w is None and m.peak_power_w is None
    assert "power undefined" in m.unknown["avg_power_w"]
    assert m.energy_j is not None  # the counter's difference is still a reading
    assert any("refresh period" in f or "zero-length" in f for f in m.flags)


def test_counter_going_backwards_is_flagged(fake_nvml, tmp_path):
    counter = tmp_path / "energy"
    fake_nvml  # stand-in GPU, counter scripted through a file (mJ)
    import os
    os.environ["FAKE_NVML_ENERGY_FILE"] = str(counter)
    try:
        counter.write_text("1000000\n")
        with gpu_meter(interval_ms=0) as meter:
            meter.begin_window("w")
            time.sleep(0.12)
            counter.write_text("1010000\n")  # +10 J
            meter.sample_now()
            time.sleep(0.12)
            counter.write_text("5000\n")  # backwards: a reset, not a plausible wrap
            m = meter.end_window("w")
    finally:
        del os.environ["FAKE_NVML_ENERGY_FILE"]
    [d] = m.domains
    assert d.untrusted_s > 0
    assert any("untrusted" in f and "backwards" in f for f in m.flags), m.flags
    assert m.energy_j >= 10.0


def test_nothing_counted_is_unknown_not_zero(env):
    with greentrain.Meter(gpus=[], cpu=False, interval_ms=0) as meter:
        meter.begin_window("w")
        m = meter.end_window("w")
    assert m.energy_j is None and m.g_co2e is None and m.avg_power_w is None
    assert "no sensor counted" in m.unknown["energy_j"]
    assert m.to_dict()["energy_j"] is None


def test_gpu_selection(fake_nvml, env):
    env.setenv("FAKE_NVML_DEVICES", "2")
    with gpu_meter(gpus=[1]) as meter:
        assert [s.name for s in meter.sensors() if s.available] == ["nvml:1"]
    with pytest.raises(greentrain.Error, match="gpus: 2 is not a visible NVIDIA GPU"):
        gpu_meter(gpus=[2])


def test_context_manager_and_decorator(fake_nvml):
    with gpu_meter() as meter:
        with meter.window("ctx") as w:
            time.sleep(0.12)
        assert w.measurement.energy_j == pytest.approx(W * w.measurement.duration_s, rel=0.05)
        assert meter.last["ctx"] is w.measurement

        with pytest.raises(ValueError):
            with meter.window("fails"):
                raise ValueError("boom")
        assert meter.last["fails"].duration_s >= 0  # measured although the body raised

        @meter.measure()
        def work(n):
            time.sleep(0.12)
            return n + (work(n - 1) if n else 0)  # recursion: windows of their own

        assert work(1) == 1
        assert work.last_measurement.energy_j == pytest.approx(
            W * work.last_measurement.duration_s, rel=0.05)
        assert 0.24 <= work.last_measurement.duration_s < 0.5  # the outer call of two
        assert meter.last[work.__qualname__] is work.last_measurement


def test_sensors_lists_the_stand_in(fake_nvml):
    s = {x.name: x for x in greentrain.sensors()}
    assert s["nvml:0"].available and s["nvml:0"].kind == "energy counter"
    assert s["rapl"].available is False and "RAPL" in s["rapl"].reason
    assert "cpu-estimate" in s


def test_to_dict_and_codecarbon_row(fake_nvml, tmp_path):
    with gpu_meter() as meter:
        meter.begin_window("w")
        time.sleep(0.12)
        m = meter.end_window("w")
    d = m.to_dict()
    json.dumps(d)  # plain data
    assert d["energy_j"] == m.energy_j and d["domains"][0]["sensor"] == "nvml:0"
    assert d["energy_j_by_domain"] == {"gpu": pytest.approx(m.energy_j)}
    assert greentrain.Measurement.from_dict(d).energy_j == m.energy_j
    row = m.to_codecarbon_row(project_name="p", run_id="r1")
    assert list(row) == greentrain.codecarbon_columns()
    assert float(row["energy_consumed"]) == pytest.approx(m.energy_j / 3.6e6, rel=1e-6)
    assert float(row["gpu_energy"]) == pytest.approx(m.energy_j / 3.6e6, rel=1e-6)
    assert float(row["emissions"]) == pytest.approx(m.g_co2e / 1000, rel=1e-6)
    assert row["energy_method"].startswith("measured")
    path = tmp_path / "emissions.csv"
    m.append_to_codecarbon_csv(str(path), run_id="r1")
    m.append_to_codecarbon_csv(str(path), run_id="r2")
    rows = list(csv.DictReader(path.open()))
    assert [r["run_id"] for r in rows] == ["r1", "r2"]


def _append_rows(args):
    path, worker = args
    with gpu_meter() as meter:
        meter.begin_window("w")
        m = meter.end_window("w")
    for r in range(4):
        m.append_to_codecarbon_csv(path, run_id=f"w{worker}-{r}")
    return worker


def test_concurrent_appends_from_worker_processes_keep_every_row(fake_nvml, tmp_path):
    # issue 31 §2: Python workers appending at once (a new file, then an existing one)
    import multiprocessing
    path = str(tmp_path / "emissions.csv")
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(12) as pool:
        assert sorted(pool.map(_append_rows, [(path, k) for k in range(12)])) == list(range(12))
        pool.map(_append_rows, [(path, k + 12) for k in range(12)])
    rows = list(csv.DictReader(open(path)))
    assert sorted(r["run_id"] for r in rows) == sorted(
        f"w{k}-{r}" for k in range(24) for r in range(4))


def test_codecarbon_file_is_never_moved_and_pue_multiplies(fake_nvml, tmp_path):
    # issue 31 §2: a CodeCarbon 2.x file keeps its rows and header; the row goes under it
    path = tmp_path / "emissions.csv"
    theirs = ("timestamp,project_name,run_id,duration,emissions,energy_consumed,pue\n"
              "2024-01-01T00:00:00,codecarbon,run-a,10,0.1,0.2,1.0\n")
    path.write_text(theirs)
    with gpu_meter(carbon=100.0) as meter:
        meter.begin_window("w")
        time.sleep(0.05)
        m = meter.end_window("w")
    left_out = m.append_to_codecarbon_csv(path, run_id="ours", pue=1.2)
    assert "energy_flags" in left_out and "water_consumed" in left_out
    assert not (tmp_path / "emissions.csv.bak").exists()
    text = path.read_text()
    assert text.startswith(theirs)
    rows = list(csv.DictReader(text.splitlines()))
    assert [r["run_id"] for r in rows] == ["run-a", "ours"]
    assert float(rows[1]["energy_consumed"]) == pytest.approx(m.energy_j * 1.2 / 3.6e6, rel=1e-6)
    assert rows[1]["pue"] == "1.2"
    (tmp_path / "other.csv").write_text("a,b\n1,2\n")
    with pytest.raises(greentrain.Error, match="other.csv.*not an emissions.csv header"):
        m.append_to_codecarbon_csv(tmp_path / "other.csv")
    assert (tmp_path / "other.csv").read_text() == "a,b\n1,2\n"


def test_carbon_series_from_csv(fake_nvml, tmp_path):
    csv_path = tmp_path / "ci.csv"
    csv_path.write_text("Time,Carbon Intensity\n2020-01-01 00:00:00,200\n"
                        "2020-01-01 01:00:00,400\n")
    with gpu_meter(carbon=csv_path, region="test grid") as meter:
        assert "series" in meter.carbon_source
        meter.begin_window("w")
        time.sleep(0.12)
        m = meter.end_window("w")
    # now is after the series: its last value (400 gCO2e/kWh) is used, and flagged
    assert m.g_co2e == pytest.approx(m.energy_j / 3.6e6 * 400, rel=1e-4)
    assert any("outside the intensity series" in f for f in m.flags)
    bad = tmp_path / "bad.csv"
    bad.write_text("Time,Carbon Intensity\n2020-01-01 00:00:00,lots\n")
    with pytest.raises(greentrain.Error, match="bad.csv"):
        gpu_meter(carbon=bad)


@pytest.mark.parametrize("interval_ms", [float("inf"), 1e300, float("nan"), 0.5, -1])
def test_interval_outside_its_range_is_refused(fake_nvml, interval_ms):
    # issue 31 §6: Meter(interval_ms=inf) spun at 100 % CPU and ignored SIGTERM
    with pytest.raises(ValueError, match=r"\[1, 3600000\] ms"):
        gpu_meter(interval_ms=interval_ms)


def test_gpu_asked_for_and_not_read_is_empty_in_the_codecarbon_row(env):
    # gpu_energy and gpu_power were 0 (CodeCarbon's "no GPU") for a GPU that was asked for and
    # could not be read: unknown is empty; energy_method said "measured; " with nothing counted
    env.setenv("GT_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1")
    with greentrain.Meter(gpus=[0], strict=False, interval_ms=20) as meter:
        meter.begin_window("w")
        time.sleep(0.12)
        m = meter.end_window("w")
    assert any("asked for but not measured" in f for f in m.flags), m.flags
    row = m.to_codecarbon_row()
    assert row["gpu_energy"] == "" and row["gpu_power"] == "", row
    # the CPU estimate still counts (a figure, 0 J where the machine was idle over 0.12 s)
    assert row["cpu_energy"] != "" and float(row["cpu_energy"]) >= 0, row
    assert "asked for but not measured" in row["energy_flags"]
    with greentrain.Meter(gpus=[], cpu=False, interval_ms=0) as meter:
        meter.begin_window("w")
        row = meter.end_window("w").to_codecarbon_row()
    assert row["energy_method"] == "none" and row["energy_consumed"] == "", row
    assert row["energy_flags"].startswith("energy unknown: ")


def test_codecarbon_row_has_pythons_version_and_no_made_up_region(fake_nvml, tmp_path):
    # as CodeCarbon writes them: python_version is the interpreter's; region a province or
    # cloud region the caller names, empty otherwise (the program wrote "world average")
    import platform
    with gpu_meter() as meter:
        meter.begin_window("w")
        m = meter.end_window("w")
    row = m.to_codecarbon_row()
    assert row["python_version"] == platform.python_version()
    assert row["region"] == ""
    assert m.to_codecarbon_row(region="quebec")["region"] == "quebec"
    path = tmp_path / "e.csv"
    m.append_to_codecarbon_csv(path)
    [written] = list(csv.DictReader(path.open()))
    assert written["python_version"] == platform.python_version() and written["region"] == ""


def test_power_w_of_an_unknown_domain_raises_naming_the_known_ones(fake_nvml):
    with gpu_meter() as meter:
        for call in (lambda: meter.power_w(domain="bogus"),
                     lambda: meter.power_timeline(domain="bogus")):
            with pytest.raises(ValueError, match="domain 'bogus' is not known; expected one of "
                                                 "'gpu', 'cpu', 'ram', 'psys' or None"):
                call()
        assert isinstance(meter.power_w(domain="psys"), dict)


def test_series_reading_options_without_a_series_are_refused(fake_nvml, tmp_path):
    # Meter(carbon=300, carbon_unit="lbs/MWh") took 300 as gCO2e/kWh without a word
    for carbon in (300, None, "DEU"):
        with pytest.raises(ValueError, match="carbon_unit = 'lbs/MWh': says how a series file "
                                             "is read; expected carbon=PATH with it") as e:
            gpu_meter(carbon=carbon, carbon_unit="lbs/MWh")
        assert "--carbon" not in str(e.value) and "energy." not in str(e.value)
    with pytest.raises(ValueError, match="carbon_column = 'LCA'"):
        gpu_meter(carbon=300, carbon_column="LCA")
    with pytest.raises(ValueError, match="carbon_time_column = 'when'"):
        gpu_meter(carbon=None, carbon_time_column="when")
    # the time zone of a series, without one (measure refuses --carbon-utc-offset so)
    with pytest.raises(ValueError, match="carbon_utc_offset_h = 2: the time zone of a series' "
                                         "times; expected carbon=PATH with it"):
        gpu_meter(carbon=300, carbon_utc_offset_h=2)
    # with a series, a unit that is not known is named as Python names it
    series = tmp_path / "f.csv"
    series.write_text("Time,Carbon Intensity\n2020-01-01 00:00:00,200\n")
    with pytest.raises(greentrain.Error, match="carbon_unit: unit 'furlongs' is not known") as e:
        gpu_meter(carbon=series, carbon_unit="furlongs")
    assert "--carbon-unit" not in str(e.value)
    with gpu_meter(carbon=series, carbon_unit="lbs/MWh") as meter:
        assert "lbs/MWh" in meter.carbon_source
