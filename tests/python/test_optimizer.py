"""PowerLimitOptimizer from Python on the stand-in NVML (limits 100..400 W, 300 W at start,
every set logged): the search's order and choice, epoch ends, the restore of the limits on
exceptions, KeyboardInterrupt (raised, and a real SIGINT in and out of a `with` block), and the
refusal without permission before anything changes."""

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

import greentrain

ORIGINAL_MW = 300000


def make(meter, **kw):
    # Loops that do no work between steps measure windows of microseconds, below the stand-in's
    # 1 mJ counter step: they compare times (the search's thread made such windows longer).
    if "max_slowdown" not in kw:
        kw.setdefault("objective", "time")
    kw.setdefault("devices", "nvml")
    kw.setdefault("step_w", 100)
    kw.setdefault("warmup_steps", 0)
    kw.setdefault("profile_steps", 2)
    kw.setdefault("verbose", False)
    return greentrain.PowerLimitOptimizer(meter, **kw)


def work(draw_mw=250000):
    """A step whose power is min(limit, 250 W) and whose time grows as the limit drops
    (the stand-in's FAKE_NVML_DRAW_MW model, speed = min(1, limit/draw)^0.5)."""
    with open(os.environ["FAKE_NVML_LIMIT_FILE"]) as f:
        limit = int(f.read().split()[0])
    time.sleep(0.02 / min(1.0, limit / draw_mw) ** 0.5)


def test_search_order_choice_and_restore(fake_nvml, env):
    env.setenv("FAKE_NVML_DRAW_MW", "250000")
    with greentrain.Meter(cpu=False, interval_ms=5) as meter:
        with make(meter, objective="energy") as plo:
            assert plo.state == "idle" and fake_nvml.changes() == []  # nothing before a step
            n = 0
            while plo.state != "done":
                plo.on_step_begin()
                n += 1
                work()
                assert n < 50
            # 4 candidates x 2 profiled steps; the 9th boundary ends the last profile
            assert n == 9
            r = plo.result()
            assert [p["limit_w"] for p in r["points"]] == [400, 300, 200, 100]
            # energy per step ~ min(L, 250 W) x time(L): lowest at 100 W
            assert plo.chosen_limit_w == 100 == r["chosen_limit_w"]
            assert fake_nvml.limit_mw() == 100000  # the chosen limit stays until close
            for _ in range(3):
                plo.on_step_begin()  # no-ops after the search
        assert plo.state == "closed"
    # the search from the top, its restore, the chosen limit, and its restore at close
    assert fake_nvml.changes() == [400000, 300000, 200000, 100000, ORIGINAL_MW, 100000,
                                   ORIGINAL_MW]
    assert fake_nvml.limit_mw() == ORIGINAL_MW


def test_epoch_end_discards_the_profiled_steps(fake_nvml):
    with greentrain.Meter(cpu=False, interval_ms=0) as meter, make(meter) as plo:
        n = 0
        while plo.state != "done":
            plo.on_step_begin()
            n += 1
            if n == 2:
                plo.on_epoch_end()  # evaluation after step 2: the 400 W profile starts again
        assert n == 11
    assert fake_nvml.limit_mw() == ORIGINAL_MW


def test_step_end_leaves_the_time_between_steps_out(fake_nvml):
    """on_step_end, as Zeus's: a limit's profile ends with its last step, and the time between
    steps (logging, evaluation) is not measured as the steps'."""
    with greentrain.Meter(cpu=False, interval_ms=0) as meter, make(meter) as plo:
        n = 0
        while plo.state != "done":
            plo.on_step_begin()
            time.sleep(0.01)
            plo.on_step_end()
            n += 1
            time.sleep(0.1)  # between steps
            assert n < 50
        assert n == 8  # 4 candidates x 2 profiled steps, the last ended by on_step_end
        times = [p["time_per_step_s"] for p in plo.result()["points"]]
        # a step measured with the gap after it would take more than the 0.1 s gap alone; a
        # loaded machine's 10 ms sleep was seen to take up to 42 ms
        assert all(0.01 <= t < 0.08 for t in times), times
    assert fake_nvml.limit_mw() == ORIGINAL_MW


def test_restore_on_exception(fake_nvml):
    with greentrain.Meter(cpu=False, interval_ms=0) as meter:
        with pytest.raises(RuntimeError, match="diverged"):
            with make(meter) as plo:
                for i in range(100):
                    plo.on_step_begin()
                    if i == 3:
                        assert fake_nvml.limit_mw() == 300000  # mid-search: 300 W candidate
                        raise RuntimeError("loss diverged")
        assert plo.state == "closed"
    assert fake_nvml.limit_mw() == ORIGINAL_MW
    assert fake_nvml.sets()[-1] == (ORIGINAL_MW, 0)


def test_restore_on_keyboard_interrupt(fake_nvml):
    with greentrain.Meter(cpu=False, interval_ms=0) as meter:
        with pytest.raises(KeyboardInterrupt):
            with make(meter) as plo:
                for i in range(100):
                    plo.on_step_begin()
                    if i == 5:
                        raise KeyboardInterrupt
    assert fake_nvml.limit_mw() == ORIGINAL_MW


def test_restore_on_sigint_in_process(fake_nvml):
    with greentrain.Meter(cpu=False, interval_ms=0) as meter:
        with pytest.raises(KeyboardInterrupt):
            with make(meter) as plo:
                for i in range(100):
                    plo.on_step_begin()
                    if i == 5:
                        assert fake_nvml.limit_mw() == 200000
                        os.kill(os.getpid(), signal.SIGINT)
                        time.sleep(1)  # Python raises KeyboardInterrupt here
                        pytest.fail("no KeyboardInterrupt")
    assert fake_nvml.limit_mw() == ORIGINAL_MW


@pytest.mark.parametrize("chosen", [False, True])
def test_restore_on_sigint_without_with_block(fake_nvml, env, chosen):
    """Ctrl-C in a loop that never closes the optimizer: during the search, and after it
    with the chosen limit in force. The process ends by KeyboardInterrupt; the limit is back."""
    env.setenv("FAKE_NVML_DRAW_MW", "250000")
    script = textwrap.dedent(f"""
        import os, sys, time, greentrain
        meter = greentrain.Meter(cpu=False, interval_ms=5)
        plo = greentrain.PowerLimitOptimizer(meter, "energy", devices="nvml", step_w=100,
                                             warmup_steps=0, profile_steps=2, verbose=False)
        for i in range(1000):
            plo.on_step_begin()
            limit = int(open(os.environ["FAKE_NVML_LIMIT_FILE"]).read().split()[0])
            time.sleep(0.02 / min(1.0, limit / 250000) ** 0.5)
            if {chosen} == (plo.state == "done") and i >= 5:
                print("ready", plo.chosen_limit_w or 200, flush=True)
                time.sleep(30)
    """)
    p = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    ready, limit_w = p.stdout.readline().split()
    assert ready == "ready" and fake_nvml.limit_mw() == float(limit_w) * 1000
    assert fake_nvml.limit_mw() != ORIGINAL_MW  # 200 W during the search, 100 W chosen
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=30)
    assert "KeyboardInterrupt" in err
    assert "power limits restored after signal" in err
    assert fake_nvml.limit_mw() == ORIGINAL_MW


def test_counts_and_weights_have_a_range(fake_nvml):
    # issue 31 §6: checked when made, naming the argument, before any device is touched
    with greentrain.Meter(cpu=False, interval_ms=0) as meter:
        for kw, text in (({"warmup_steps": -1}, "warmup_steps=-1"),
                         ({"profile_steps": 0}, "profile_steps=0"),
                         ({"profile_steps": 2**40}, "profile_steps=1099511627776"),
                         ({"eta": 1.5}, "eta=1.5"), ({"eta": float("nan")}, "eta=nan"),
                         ({"step_w": 0}, "step_w=0"), ({"step_w": float("inf")}, "step_w=inf"),
                         ({"max_slowdown": 0.5}, "max_slowdown=0.5")):
            with pytest.raises(ValueError, match=text):
                make(meter, **kw)
    assert fake_nvml.changes() == []


def test_refuses_without_permission(fake_nvml, env):
    env.setenv("FAKE_NVML_SET_RC", "4")  # NVML_ERROR_NO_PERMISSION
    with greentrain.Meter(cpu=False, interval_ms=0) as meter:
        with pytest.raises(PermissionError, match="nothing was changed"):
            make(meter)
    assert fake_nvml.changes() == [] and all(rc == 4 for _, rc in fake_nvml.sets())
    assert fake_nvml.limit_mw() == ORIGINAL_MW


def test_closing_the_meter_closes_the_optimizer(fake_nvml):
    meter = greentrain.Meter(cpu=False, interval_ms=0)
    plo = make(meter)
    for _ in range(6):
        plo.on_step_begin()
    assert fake_nvml.limit_mw() == 200000
    meter.close()
    assert plo.state == "closed" and fake_nvml.limit_mw() == ORIGINAL_MW


def test_forked_children_leave_the_chosen_limit(fake_nvml, env):
    """Issue 31 §3: after the search chose a limit (100 W on an idle host), a multiprocessing
    worker ended by SIGTERM (Pool.terminate), a plain os.fork() child that exits normally
    (atexit and finalizers run there), and a child killed by SIGTERM all leave the parent's
    limit in force; the parent's close() restores it. A child's own Meter use is refused with
    the reason."""
    env.setenv("FAKE_NVML_DRAW_MW", "250000")
    script = textwrap.dedent("""
        import multiprocessing, os, signal, sys, time, greentrain
        meter = greentrain.Meter(cpu=False, interval_ms=5)
        plo = greentrain.PowerLimitOptimizer(meter, "energy", devices="nvml", step_w=100,
                                             warmup_steps=0, profile_steps=2, verbose=False)
        def limit():
            return int(open(os.environ["FAKE_NVML_LIMIT_FILE"]).read().split()[0])
        while plo.state != "done":
            plo.on_step_begin()
            time.sleep(0.02 / min(1.0, limit() / 250000) ** 0.5)
        # the choice itself is test_search_order_choice_and_restore's subject; here it is the
        # limit the children must leave (a loaded CI host once measured 200 W lower)
        chosen = plo.chosen_limit_w * 1000
        assert limit() == chosen and chosen < 300000, (limit(), chosen)
        def sleeper(_):
            time.sleep(60)
        pool = multiprocessing.get_context("fork").Pool(2)
        pool.map_async(sleeper, range(2))
        time.sleep(0.5)
        pool.terminate()  # SIGTERM to the workers
        pool.join()
        print("after pool", limit() == chosen, flush=True)
        pid = os.fork()
        if pid == 0:
            try:
                meter.begin_window("child")
                print("child measured", flush=True)
            except greentrain.Error as e:
                print("child refused:", "forked child" in str(e), flush=True)
            sys.exit(0)  # a normal exit: atexit, finalizers
        os.waitpid(pid, 0)
        print("after exit", limit() == chosen, flush=True)
        pid = os.fork()
        if pid == 0:
            time.sleep(60)
            os._exit(0)
        time.sleep(0.3)
        os.kill(pid, signal.SIGTERM)
        os.waitpid(pid, 0)
        print("after sigterm", limit() == chosen, flush=True)
        plo.close()
        print("after close", limit(), flush=True)
    """)
    p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines() == ["after pool True", "child refused: True",
                                     "after exit True", "after sigterm True",
                                     f"after close {ORIGINAL_MW}"], p.stderr


def test_warms_up_again_after_an_epoch_end(fake_nvml):
    """Issue 31 §7: an epoch end inside a limit's profile restarts its warm-up, so an epoch's
    slow first step (a data loader starting) is never measured. Epochs of 5 steps, the first
    3x slower; warm-up 1, profile 2, so epoch ends fall inside profiles (at 300 W and at 200 W
    and 100 W): Zeus, which warms up again, keeps 200 W, as fast as 400 W, within 1.5 x its
    time; a slow step measured makes a profile 2x (here 300 W's: (3 + 1) / 2)."""
    # 400, 300 and 200 W as fast, 100 W 3x slower: a loaded machine's sleeps overshoot by some
    # ms (one run at load 17 failed 60 ms steps told apart by 10 %); 100 ms steps compared
    # against 1.5 x keep a margin of 50 ms a step, and a slow step measured still shows: with
    # 30 ms of overshoot on every step, a profile with one is (400 + 60) / (200 + 60) = 1.8x
    factor = {400000: 1.0, 300000: 1.0, 200000: 1.0, 100000: 3.0}
    with greentrain.Meter(cpu=False, interval_ms=0) as meter:
        with make(meter, max_slowdown=1.5, warmup_steps=1, profile_steps=2) as plo:
            g = 0
            while plo.state != "done":
                plo.on_step_begin()
                time.sleep(0.1 * factor[fake_nvml.limit_mw()] * (3 if g % 5 == 0 else 1))
                g += 1
                if g % 5 == 0:
                    plo.on_epoch_end()
                assert g < 100
            times = {p["limit_w"]: p["time_per_step_s"] for p in plo.result()["points"]}
            assert plo.chosen_limit_w == 200, times
            for w in (300, 200):  # no slow step in either
                assert times[w] < 1.5 * times[400], times
    assert fake_nvml.limit_mw() == ORIGINAL_MW


def test_epoch_too_short_for_a_profile_is_said(fake_nvml):
    """Issue 31 §7: epochs of 2 steps can never hold 2 warm-up and 2 profiled steps: the search
    fails saying so (it restarted forever), and the limits in force before are back."""
    with greentrain.Meter(cpu=False, interval_ms=0) as meter:
        with make(meter, warmup_steps=2, profile_steps=2) as plo:
            with pytest.raises(greentrain.Error, match=r"epoch of 2 step\(s\) ended before"):
                for g in range(1, 200):
                    plo.on_step_begin()
                    if g % 2 == 0:
                        plo.on_epoch_end()
            assert plo.state == "failed"
    assert fake_nvml.limit_mw() == ORIGINAL_MW


def test_meter_flags_and_refusals_pass_through(fake_nvml):
    """Issue 31 §7: the Python path keeps what the meter says, as `greentrain tune` does: an
    energy objective on a CPU estimate alone (blind to the GPU limit) is refused, not run to the
    lowest limit; windows shorter than NVML's refresh period keep their flags in the profile."""
    with greentrain.Meter(gpus=[], cpu=True, interval_ms=10) as meter:
        assert meter.estimated
        with make(meter, objective="energy") as plo:
            with pytest.raises(greentrain.Error, match="only an estimate"):
                for _ in range(20):
                    plo.on_step_begin()
                    time.sleep(0.01)
    assert fake_nvml.limit_mw() == ORIGINAL_MW
    with greentrain.Meter(cpu=False, interval_ms=0) as meter:
        with make(meter, objective="time", profile_steps=1) as plo:
            while plo.state != "done":
                plo.on_step_begin()
                time.sleep(0.005)
            flags = [f for p in plo.result()["points"] for f in p["flags"]]
            assert any("refresh" in f for f in flags), plo.result()["points"]
