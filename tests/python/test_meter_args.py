"""Meter and PowerLimitOptimizer arguments are checked when they are made, as ValueError naming
the argument, with the ranges of `measure` and the training configuration; a measured process
that does not exist is refused, and one that ends makes its windows' energy unknown, never 0.

A user review found: cpu_tdp_w=nan gave energy_j nan, -5 gave 0 J ("counter went backwards"),
1e9 gave 505 MJ in 0.5 s, 0 gave 0 J (the training configuration's 0 is the CPU table);
pid=999999 and pid=-1 gave 0 J in every window; carbon="DEU" beside country="FRA" dropped FRA;
timeline_points=-1 raised RuntimeError std::bad_cast; carbon=nan raised greentrain.Error;
objective="bogus" said "no device found". A later one: eta and max_slowdown were taken beside
objectives that do not read them (`greentrain tune` refuses them), carbon="300" was read as a
path, carbon=True and interval_ms="100" raised a bare TypeError, and an implausible intensity
(kg/kWh given as g/kWh) was not warned of as the CLI warns of it."""

import os
import re
import subprocess
import sys
import time
import warnings

import pytest

import greentrain


def busy(seconds):
    t = time.time()
    while time.time() - t < seconds:
        pass


@pytest.mark.parametrize("tdp", [-5, float("nan"), float("inf"), 1e9, 0.5, 2000.5])
def test_cpu_tdp_outside_one_to_two_thousand_watts_is_refused(env, tdp):
    with pytest.raises(ValueError, match=r"cpu_tdp_w = .*expected None or 0 \(the CPU model's "
                                         r"table\) or a TDP per socket in \[1, 2000\] W"):
        greentrain.Meter(gpus=[], interval_ms=0, cpu_tdp_w=tdp)
    with pytest.raises(ValueError, match="cpu_tdp_w='85'"):
        greentrain.Meter(gpus=[], interval_ms=0, cpu_tdp_w="85")


def test_cpu_tdp_zero_or_none_is_the_cpu_table_and_a_given_one_is_used(env):
    methods = {}
    for tdp in (None, 0, 150):
        with greentrain.Meter(gpus=[], interval_ms=0, cpu_tdp_w=tdp) as meter:
            meter.begin_window("w")
            busy(0.2)
            m = meter.end_window("w")
        assert m.energy_j is not None and m.energy_j > 0, (tdp, m.flags)
        assert not any("backwards" in f for f in m.flags), m.flags
        methods[tdp] = m.method
    assert methods[0] == methods[None]  # 0 is the table, as energy.cpu_tdp_w = 0
    assert "150" in methods[150] and methods[150] != methods[None]


@pytest.mark.parametrize("pid", [-1, -5])
def test_negative_pid_is_refused(env, pid):
    with pytest.raises(ValueError, match=f"pid = {pid}: expected the id of a running process"):
        greentrain.Meter(gpus=[], interval_ms=0, pid=pid)


def test_pid_of_no_process_is_refused(env):
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()  # reaped: gone
    with pytest.raises(ValueError, match=f"pid = {p.pid}: no such process"):
        greentrain.Meter(gpus=[], interval_ms=0, pid=p.pid)
    for bad in (True, 2**40):  # not a number of a process; not a C int (was std::bad_cast)
        with pytest.raises(ValueError, match=f"pid={bad!r}"):
            greentrain.Meter(gpus=[], interval_ms=0, pid=bad)


def test_own_pid_is_measured(env):
    with greentrain.Meter(gpus=[], interval_ms=50, pid=os.getpid()) as meter:
        with meter.window("busy") as w:
            busy(0.5)
    m = w.measurement
    assert m.energy_j is not None and m.energy_j > 0, m.flags
    assert m.estimated


def test_a_process_that_ends_during_a_window_makes_its_energy_unknown(env):
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.4)"])
    try:
        with greentrain.Meter(gpus=[], interval_ms=50, pid=p.pid) as meter:
            meter.begin_window("before")
            time.sleep(0.1)
            before = meter.end_window("before")
            meter.begin_window("ends")
            p.wait()  # reaped: its /proc entry is gone
            time.sleep(0.2)
            ends = meter.end_window("ends")
            meter.begin_window("after")
            time.sleep(0.1)
            after = meter.end_window("after")
    finally:
        p.kill()
        p.wait()
    assert before.energy_j is not None
    for m in (ends, after):
        assert m.energy_j is None, (m.energy_j, m.flags)  # never 0 J
        assert m.g_co2e is None
        assert f"process {p.pid} has ended" in m.unknown["energy_j"], m.unknown
        assert m.to_dict()["energy_j"] is None


def test_country_beside_another_carbon_country_is_refused(env):
    with pytest.raises(ValueError, match="carbon='DEU' is the average of Germany and "
                                         "country='FRA' names France"):
        greentrain.Meter(gpus=[], interval_ms=0, carbon="DEU", country="FRA")
    with greentrain.Meter(gpus=[], interval_ms=0, carbon="DEU", country="DEU") as meter:
        assert meter.country[0] == "DEU"
    with greentrain.Meter(gpus=[], interval_ms=0, carbon=300, country="FRA") as meter:
        assert meter.country[0] == "FRA"


@pytest.mark.parametrize("points", [-1, 2.5, "10", True, 2**64])
def test_timeline_points_must_be_a_whole_number_from_zero(env, points):
    with pytest.raises(ValueError, match=f"timeline_points={points!r}: expected a whole number"):
        greentrain.Meter(gpus=[], interval_ms=0, timeline_points=points)
    greentrain.Meter(gpus=[], interval_ms=0, timeline_points=0).close()


@pytest.mark.parametrize("carbon", [-1, float("nan"), float("inf"), -float("inf")])
def test_carbon_number_must_be_finite_and_not_negative(env, carbon):
    with pytest.raises(ValueError, match=r"carbon=.* gCO2e/kWh: expected a finite number >= 0"):
        greentrain.Meter(gpus=[], interval_ms=0, carbon=carbon)


def test_another_readers_advice_names_pythons_pid_argument(env):
    # another process reads the machine's estimates; the CLI's "--process" is not an argument
    # of Meter
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, greentrain; m = greentrain.Meter(gpus=[], "
         "interval_ms=0); print('ready', flush=True); sys.stdin.read()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=dict(os.environ))
    try:
        assert holder.stdout.readline().strip() == "ready"
        with greentrain.Meter(gpus=[], interval_ms=0) as second:
            every = [s.reason for s in second.sensors()]
    finally:
        holder.stdin.close()
        holder.wait()
    reasons = [r for r in every if "not the reader" in r]
    assert reasons, every
    for r in reasons:
        assert "Meter(pid=os.getpid())" in r and "--process" not in r, r


def test_unknown_objective_is_refused_before_any_device_is_looked_for(env):
    with greentrain.Meter(gpus=[], cpu=False, interval_ms=0) as meter:
        with pytest.raises(ValueError, match="objective 'bogus' is not known; expected"):
            greentrain.PowerLimitOptimizer(meter, objective="bogus", devices="nvml")
        with pytest.raises(ValueError, match="objective=3"):
            greentrain.PowerLimitOptimizer(meter, objective=3, devices="nvml")
        # a good objective gets as far as the devices: none here
        with pytest.raises(greentrain.Error):
            greentrain.PowerLimitOptimizer(meter, objective="slowdown", devices="nvml")


@pytest.mark.parametrize("objective", ["energy", "time", "slowdown"])
def test_eta_beside_an_objective_that_does_not_read_it_is_refused(env, objective):
    # as `greentrain tune --eta` beside another --objective (exit 2): it would change nothing
    with greentrain.Meter(gpus=[], cpu=False, interval_ms=0) as meter:
        with pytest.raises(ValueError, match=rf"eta=0.7 applies to objective='cost' only .*"
                                             rf"objective='{objective}' does not choose by it"):
            greentrain.PowerLimitOptimizer(meter, objective=objective, eta=0.7, devices="nvml")


@pytest.mark.parametrize("objective", ["cost", "energy", "time"])
def test_max_slowdown_beside_an_objective_that_does_not_read_it_is_refused(env, objective):
    # objective="cost" given with max_slowdown was silently switched to "slowdown"
    with greentrain.Meter(gpus=[], cpu=False, interval_ms=0) as meter:
        with pytest.raises(ValueError, match=rf"max_slowdown=1.2 applies to "
                                             rf"objective='slowdown' only .*"
                                             rf"objective='{objective}' does not read it"):
            greentrain.PowerLimitOptimizer(meter, objective=objective, max_slowdown=1.2,
                                           devices="nvml")


@pytest.mark.parametrize("kw", [{"eta": 0.7}, {"objective": "cost", "eta": 0.7},
                                {"max_slowdown": 1.2},
                                {"objective": "slowdown", "max_slowdown": 1.2}])
def test_eta_and_max_slowdown_with_their_objective_are_taken(env, kw):
    # they get as far as the devices: none here
    with greentrain.Meter(gpus=[], cpu=False, interval_ms=0) as meter:
        with pytest.raises(greentrain.Error, match="power limit: no NVIDIA GPU found"):
            greentrain.PowerLimitOptimizer(meter, devices="nvml", **kw)


def test_a_numeric_carbon_string_is_an_intensity(env, tmp_path, monkeypatch):
    # carbon="300" was read as the path of a series (file not found)
    with greentrain.Meter(gpus=[], interval_ms=0, carbon=300) as meter:
        expected = meter.carbon_source
    for text in ("300", " 300 ", "3e2", "300.0"):
        with greentrain.Meter(gpus=[], interval_ms=0, carbon=text) as meter:
            assert meter.carbon_source == expected, text
    with pytest.raises(ValueError, match=r"carbon=-5.0 gCO2e/kWh: expected a finite number"):
        greentrain.Meter(gpus=[], interval_ms=0, carbon="-5")
    # a file of that name stays a path, as a file named like a country code does
    monkeypatch.chdir(tmp_path)
    (tmp_path / "300").write_text("Time,Carbon Intensity\n2020-01-01 00:00,42\n")
    with greentrain.Meter(gpus=[], interval_ms=0, carbon="300") as meter:
        assert "series 300" in meter.carbon_source, meter.carbon_source


@pytest.mark.parametrize("carbon", [True, False, [300], 1j])
def test_carbon_of_another_type_is_refused_naming_it(env, carbon):
    # carbon=True raised "expected str, bytes or os.PathLike object, not bool"
    text = r"carbon=%s: expected a number \(gCO2e/kWh\), a country code such as 'DEU', the " \
        r"path of an intensity series, or None" % re.escape(repr(carbon))
    if isinstance(carbon, bool):
        text += r" \(the world average\); a bool is not an intensity"
    with pytest.raises(TypeError, match=text):
        greentrain.Meter(gpus=[], interval_ms=0, carbon=carbon)


@pytest.mark.parametrize("interval", ["100", True, [100], 1j])
def test_interval_of_another_type_is_refused_naming_it(env, interval):
    # interval_ms="100" raised "'<=' not supported between instances of 'int' and 'str'";
    # interval_ms=True sampled every 1 ms
    with pytest.raises(TypeError, match=rf"interval_ms={re.escape(repr(interval))}: expected a "
                                        r"number of ms, 0 \(no sampling thread\) or a period"):
        greentrain.Meter(gpus=[], interval_ms=interval)


def carbon_warnings(**kw):
    """The warnings a Meter made with `kw` gives."""
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        greentrain.Meter(gpus=[], interval_ms=0, **kw).close()
    return [str(w.message) for w in got if issubclass(w.category, UserWarning)]


def test_an_implausible_carbon_intensity_is_warned_of_once_per_source(env, tmp_path):
    # `measure`, `train` and `schedule` warn of an intensity outside 1..2000 gCO2e/kWh (a
    # kg/kWh figure given as g/kWh); Python's Meter said nothing
    greentrain.meter._carbon_warned.clear()
    low = carbon_warnings(carbon=0.45)
    assert len(low) == 1, low
    assert re.match(r"Meter\(carbon=0\.45\): carbon intensity 0\.45 gCO2e/kWh lies outside "
                    r"1\.\.2000 gCO2e/kWh.*kg/kWh", low[0]), low
    assert carbon_warnings(carbon=0.45) == []  # once per source
    high = carbon_warnings(carbon="450000")
    assert len(high) == 1 and "450000" in high[0] and "g/MWh" in high[0], high
    series = tmp_path / "kg.csv"
    series.write_text("Time,Carbon Intensity\n2020-01-01 00:00,0.3\n2020-01-01 01:00,0.4\n")
    got = carbon_warnings(carbon=series)
    assert len(got) == 1 and f"carbon series {series}: 2 of 2 values lie outside" in got[0], got
    assert "carbon_unit" in got[0], got  # how to read it in kg/kWh, in Python's words
    assert carbon_warnings(carbon=series) == []
    for plausible in (300, 0, None, "DEU"):  # 0 is a choice (a zero-carbon supply)
        assert carbon_warnings(carbon=plausible) == [], plausible
