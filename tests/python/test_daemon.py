"""`greentrain serve` from Python (issue 28): two Meters in one process both measure (through the
daemon, and directly, sharing the reader); a `greentrain train` beside a Python Meter both get
the GPU counter's energy; the PowerLimitOptimizer sets and restores limits through the daemon
for a process NVML itself refuses."""

import contextlib
import json
import os
import socket
import subprocess
import threading
import time

import pytest

import greentrain

PROGRAM = os.environ.get("GT_TEST_PROGRAM", "")
WATTS = 150.0  # the stand-in GPU's power (conftest.fake_nvml)


def gpu_watts(m):
    """The GPU domain's average power (W) of a measurement."""
    d = [x for x in m.domains if x.sensor == "nvml:0"]
    assert d, m.flags
    return d[0].energy_j / m.duration_s


@contextlib.contextmanager
def start_daemon(env, tmp_path):
    """`greentrain serve --foreground` with this environment, its socket in $GT_DAEMON_SOCKET."""
    if not PROGRAM or not os.path.exists(PROGRAM):
        pytest.skip("GT_TEST_PROGRAM is not the greentrain program (run through ctest)")
    sock = tmp_path / "serve.sock"
    log = open(tmp_path / "daemon.log", "w")
    p = subprocess.Popen([PROGRAM, "serve", "--foreground", "--socket", str(sock),
                          "--state-file", str(tmp_path / "state.json"), "--interval", "50"],
                         stdout=log, stderr=subprocess.STDOUT, env=dict(os.environ))
    deadline = time.time() + 20
    while time.time() < deadline:
        try:
            with socket.socket(socket.AF_UNIX) as s:
                s.connect(str(sock))
            break
        except OSError:
            time.sleep(0.05)
    else:
        p.kill()
        pytest.fail("the daemon did not start: " + (tmp_path / "daemon.log").read_text())
    env.setenv("GT_DAEMON_SOCKET", str(sock))
    try:
        yield p
    finally:
        p.terminate()
        p.wait(10)


@pytest.fixture
def daemon(fake_nvml, env, tmp_path):
    """The daemon on the stand-in NVML (150 W)."""
    with start_daemon(env, tmp_path) as p:
        yield p


def test_two_meters_in_one_process_through_the_daemon(daemon):
    m1 = greentrain.Meter(cpu=False, interval_ms=0)
    m2 = greentrain.Meter(cpu=False, interval_ms=0)
    assert "greentrain serve" in m1.reading_source
    m1.begin_window("a")
    time.sleep(0.2)
    m2.begin_window("b")
    time.sleep(0.2)
    a = m1.end_window("a")
    b = m2.end_window("b")
    # the counter's energy over each window's own readings: 150 W exactly
    assert gpu_watts(a) == pytest.approx(WATTS, rel=1e-3)
    assert gpu_watts(b) == pytest.approx(WATTS, rel=1e-3)
    assert a.duration_s > b.duration_s


def test_two_meters_in_one_process_without_a_daemon(fake_nvml, env, tmp_path):
    env.setenv("GT_DAEMON_SOCKET", str(tmp_path / "none.sock"))
    m1 = greentrain.Meter(cpu=False, interval_ms=0)
    m2 = greentrain.Meter(cpu=False, interval_ms=0)
    assert m1.reading_source == "direct"
    m1.begin_window("a")
    m2.begin_window("b")
    time.sleep(0.2)
    a, b = m1.end_window("a"), m2.end_window("b")
    for m in (a, b):
        assert m.energy_j is not None, m.flags
        assert not any("another process" in f for f in m.flags), m.flags
        assert gpu_watts(m) == pytest.approx(WATTS, rel=0.05)


def test_train_beside_a_python_meter(fake_nvml, env, tmp_path):
    # The CPU package's counter (a stand-in RAPL tree) rises at 100 W; `train` on the CPU and a
    # Python Meter beside it both read it through the daemon and both see 100 W.
    # 20000 steps: a run well over 0.5 s (6000 took 0.49 s once logged energy intervals were
    # merged to 10 counter refresh periods, no longer read through the daemon every step).
    zone = tmp_path / "powercap" / "intel-rapl:0"
    zone.mkdir(parents=True)
    (zone / "name").write_text("package-0\n")
    (zone / "energy_uj").write_text("0\n")
    (zone / "max_energy_range_uj").write_text("262143328850\n")
    stop = threading.Event()

    def counter():
        t0 = time.monotonic()
        while not stop.is_set():
            uj = int((time.monotonic() - t0) * 100e6)  # 100 W
            (zone / "energy_uj.tmp").write_text("%d\n" % uj)
            os.replace(zone / "energy_uj.tmp", zone / "energy_uj")
            time.sleep(0.002)

    th = threading.Thread(target=counter)
    th.start()
    try:
        with start_daemon(env, tmp_path):
            (tmp_path / "t.txt").write_text("ab" * 4000)
            (tmp_path / "c.toml").write_text(
                "[model]\nn_layer = 1\nn_head = 1\nn_embd = 8\nblock_size = 8\n"
                "[train]\nbatch_size = 2\nmax_steps = 20000\nthreads = 1\ndevice = \"ref\"\n"
                "eval_steps = 1\n[data]\npath = \"%s\"\nformat = \"text\"\n"
                "tokenizer = \"char\"\n" % (tmp_path / "t.txt"))
            with greentrain.Meter(gpus=[], interval_ms=20) as meter:
                meter.begin_window("beside")
                r = subprocess.run([PROGRAM, "train", str(tmp_path / "c.toml"), "--out",
                                    str(tmp_path / "run")], capture_output=True, text=True,
                                   env=dict(os.environ), timeout=240)
                mine = meter.end_window("beside")
                source = meter.reading_source
    finally:
        stop.set()
        th.join()
    assert r.returncode == 0, r.stdout + r.stderr
    assert "greentrain serve" in source
    train = json.loads((tmp_path / "run" / "summary.json").read_text())["energy"]
    assert train["energy_j"] is not None, train
    cpu = [d for d in train["domains"] if d["sensor"] == "rapl:package-0"]
    assert cpu, train["flags"]
    assert train["duration_s"] > 0.5, train
    # the counter moves in steps a thread writes (late under load): 10 %
    assert cpu[0]["energy_j"] / train["duration_s"] == pytest.approx(100, rel=0.1)
    mine_cpu = [d for d in mine.domains if d.sensor == "rapl:package-0"]
    assert mine_cpu, mine.flags
    assert mine_cpu[0].energy_j / mine.duration_s == pytest.approx(100, rel=0.1)


def test_power_limit_optimizer_without_root_through_the_daemon(daemon, fake_nvml, env):
    env.setenv("FAKE_NVML_SET_RC", "4")  # NVML refuses this process; the daemon may set
    devs = greentrain.power_limit_devices("nvml")
    assert "through greentrain serve" in devs[0].name
    assert devs[0].permission_problem() == ""
    with greentrain.Meter(cpu=False, interval_ms=5) as meter:
        with greentrain.PowerLimitOptimizer(meter, devices="nvml", objective="energy", step_w=100,
                                            warmup_steps=0, profile_steps=1,
                                            verbose=False) as plo:
            for _ in range(12):
                plo.on_step_begin()
                time.sleep(0.01)
            assert plo.state == "done", plo.state
            assert plo.chosen_limit_w is not None
    assert fake_nvml.limit_mw() == 300000
    assert 100000 in fake_nvml.changes()
