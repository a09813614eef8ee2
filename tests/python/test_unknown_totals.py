"""Unknown energy is never logged as 0 by the framework integrations: a step (interval, batch)
of unknown energy logs no figure, and the totals over steps where one was unknown are None with
a reason (``total_unknown_reason``), not a silent partial sum; ``known_total_j`` keeps the sum
of the known ones, a lower bound. A review found total_j = 0.0 written to TensorBoard, MLflow,
the Hugging Face Trainer's logs and Lightning's when every step was unknown."""

import importlib.util
import time
from types import SimpleNamespace

import pytest

import greentrain
from greentrain.integrations import EnergyLogger


class MixedMeter:
    """Windows from a meter that measures (the stand-in GPU) or from one that counts nothing,
    as `known` says for each window ended, in order."""

    def __init__(self, known):
        self.good = greentrain.Meter(cpu=False, interval_ms=0)
        self.none = greentrain.Meter(gpus=[], cpu=False, interval_ms=0)
        self.known = list(known)

    def begin_window(self, name):
        self.good.begin_window(name)
        self.none.begin_window(name)

    def end_window(self, name):
        a, b = self.good.end_window(name), self.none.end_window(name)
        return a if self.known.pop(0) else b

    def has_window(self, name):
        return self.good.has_window(name)

    def close(self):
        self.good.close()
        self.none.close()


class Sink:
    """A TensorBoard writer (add_scalar) and an MLflow (log_metrics) at once."""

    def __init__(self):
        self.scalars = []  # (name, value, step)

    def add_scalar(self, k, v, step):
        self.scalars.append((k, v, step))

    def log_metrics(self, values, step):
        for k, v in values.items():
            self.scalars.append((k, v, step))

    def names(self, step):
        return {k for k, _, s in self.scalars if s == step}


def test_energy_logger_total_is_unknown_once_a_step_is(fake_nvml):
    meter = MixedMeter([True, False, True])
    sink = Sink()
    try:
        log = EnergyLogger(meter, writer=sink)
        for _ in range(3):
            with log.step(tokens=10):
                time.sleep(0.01)
    finally:
        meter.close()
    assert log.records[0].energy_j > 0 and log.records[1].energy_j is None
    assert "energy/total_j" in sink.names(0)
    for step in (1, 2):  # from the unknown step on: no total, never 0
        assert "energy/total_j" not in sink.names(step)
        assert "energy/total_g_co2e" not in sink.names(step)
    assert "energy/step_j" not in sink.names(1) and "energy/step_j" in sink.names(2)
    assert all(v != 0 for k, v, _ in sink.scalars if k.endswith("total_j"))
    assert log.total_j is None and log.total_g_co2e is None and log.unknown_steps == 1
    assert log.known_total_j == pytest.approx(log.records[0].energy_j + log.records[2].energy_j)
    assert "1 of 3 steps had unknown energy" in log.total_unknown_reason
    assert "no sensor counted" in log.total_unknown_reason


def test_energy_logger_total_of_known_steps(fake_nvml):
    meter = MixedMeter([True, True])
    try:
        log = EnergyLogger(meter)
        for _ in range(2):
            with log.step():
                time.sleep(0.01)
    finally:
        meter.close()
    assert log.total_j == pytest.approx(log.known_total_j) and log.total_j > 0
    assert log.total_unknown_reason is None and log.unknown_steps == 0


@pytest.mark.skipif(importlib.util.find_spec("transformers") is None,
                    reason="transformers is not installed")
def test_huggingface_callback_total_is_unknown_once_an_interval_is(fake_nvml):
    from greentrain.integrations import GreentrainCallback

    meter = MixedMeter([False, True])
    try:
        cb = GreentrainCallback(meter)
        state = SimpleNamespace(num_input_tokens_seen=0, global_step=1,
                                log_history=[{"step": 1}])
        cb.on_train_begin(None, state, None)
        logs = {"loss": 1.0}
        cb.on_log(None, state, None, logs=logs)
        state.global_step = 2
        state.log_history.append({"step": 2})
        last = {"train_runtime": 1.0}
        cb.on_log(None, state, None, logs=last)
    finally:
        meter.close()
    for entry in (logs, last):  # what the reporters get: no total, never 0
        assert "energy_total_j" not in entry and "energy_total_g_co2e" not in entry, entry
    assert "energy_j" not in logs and last["energy_j"] > 0
    assert state.log_history[-1]["energy_total_j"] is None  # null in trainer_state.json
    assert cb.total_j is None and cb.unknown_intervals == 1
    assert cb.known_total_j == pytest.approx(last["energy_j"])
    assert "1 of 2 intervals had unknown energy" in cb.total_unknown_reason


@pytest.mark.skipif(importlib.util.find_spec("lightning") is None
                    and importlib.util.find_spec("pytorch_lightning") is None,
                    reason="lightning is not installed")
def test_lightning_callback_total_is_unknown_once_a_batch_is(fake_nvml):
    from greentrain.integrations.lightning import GreentrainLightningCallback

    logged = []
    module = SimpleNamespace(log_dict=lambda d, **kw: logged.append(dict(d)))
    # windows: gap before batch 0, batch 0, gap, batch 1 (unknown), gap, batch 2
    meter = MixedMeter([True, True, True, False, True, True, True])
    try:
        cb = GreentrainLightningCallback(meter)
        cb.on_fit_start(None, module)
        for i in range(3):
            cb.on_train_batch_start(None, module, None, i)
            time.sleep(0.01)
            cb.on_train_batch_end(None, module, None, None, i)
        cb.on_fit_end(None, module)
    finally:
        meter.close()
    assert len(logged) == 2  # the unknown batch logs nothing
    assert "energy/total_j" in logged[0]
    assert "energy/total_j" not in logged[1] and "energy/total_g_co2e" not in logged[1]
    assert logged[1]["energy/step_j"] > 0
    assert cb.total_j is None and cb.unknown_steps == 1 and cb.known_total_j > 0
    assert "had unknown energy" in cb.total_unknown_reason


def test_unknown_energys_reason_is_the_energys_not_every_flag(env, tmp_path):
    # m.unknown["energy_j"] joined every flag, a carbon series' gap among them; the CLI gives
    # the energy's own reason (energy_unknown_reason)
    series = tmp_path / "old.csv"
    series.write_text("Time,Carbon Intensity\n2020-01-01 00:00,300\n2020-01-01 01:00,310\n")
    with greentrain.Meter(gpus=[], cpu=False, interval_ms=0, carbon=series) as meter:
        with meter.window("w") as w:
            pass
    m = w.measurement
    assert m.energy_j is None
    assert any(f.startswith("carbon:") for f in m.flags), m.flags  # the series ended in 2020
    for k in ("energy_j", "g_co2e", "avg_power_w", "peak_power_w"):
        assert m.unknown[k] == "no sensor counted: no energy sensor on this machine", m.unknown
    assert greentrain.Measurement.from_dict(m.to_dict()).unknown == m.unknown
    # a dict without the C++ reason: the flags that concern the energy, not the others
    d = dict(m.to_dict(), unknown={})
    assert greentrain.Measurement.from_dict(d).unknown["energy_j"] == \
        "no sensor counted: energy is unknown, not 0"
