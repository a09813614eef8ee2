"""A Hugging Face ``transformers`` TrainerCallback that adds energy to the trainer's logs.

    meter = greentrain.Meter()
    cb = GreentrainCallback(meter)
    trainer = Trainer(model=model, args=args, train_dataset=ds, callbacks=[cb])
    trainer.train()     # every log entry gets energy_j, energy_avg_power_w, energy_g_co2e, ...

Each log entry gets the energy since the previous one: ``energy_j`` (J, None when unknown),
``energy_duration_s`` (s), ``energy_avg_power_w`` (W, None when the interval is shorter than a
sensor's refresh period), ``energy_g_co2e`` (gCO2e), ``energy_estimated`` (bool),
``energy_total_j`` (J since training began) and, when the trainer counts input tokens
(``include_num_input_tokens_seen=True``), ``energy_j_per_token``. Callbacks passed to
``Trainer`` run after the built-in printers and reporters; ``add_to_trainer(trainer, cb)``
puts this one first so that they see the energy too. With a PowerLimitOptimizer, its
on_step_begin/on_epoch_end are called and it is closed when training ends.
"""

from __future__ import annotations

from typing import Any, Dict, Optional

from transformers import TrainerCallback

from ..measurement import Measurement
from ..meter import Meter

__all__ = ["GreentrainCallback", "add_to_trainer"]


class GreentrainCallback(TrainerCallback):  # type: ignore[misc]
    """Adds the energy of each logging interval to the trainer's logs (see module docstring).

    Args:
        meter: the Meter (default: a new ``greentrain.Meter()``, closed when training ends).
        optimizer: a PowerLimitOptimizer driven from the trainer's steps and epochs.
    """

    def __init__(self, meter: Optional[Meter] = None, optimizer: Any = None) -> None:
        self.meter = meter
        self._own_meter = meter is None
        self.optimizer = optimizer
        self.total_j = 0.0
        self.measurements: list = []
        """The Measurement of every logging interval, in order."""
        self._tokens0 = 0
        self._window = f"greentrain.hf@{id(self):x}"

    def _open(self) -> None:
        assert self.meter is not None
        self.meter.begin_window(self._window)

    def _close(self) -> Measurement:
        assert self.meter is not None
        m = self.meter.end_window(self._window)
        self.measurements.append(m)
        if m.energy_j is not None:
            self.total_j += m.energy_j
        return m

    def on_train_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        if self.meter is None:
            self.meter = Meter()
        self._tokens0 = int(getattr(state, "num_input_tokens_seen", 0) or 0)
        self._open()

    def on_step_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        if self.optimizer is not None:
            self.optimizer.on_step_begin()

    def on_epoch_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        if self.optimizer is not None:
            self.optimizer.on_epoch_end()

    def _energy_logs(self, state: Any) -> Dict[str, Any]:
        m = self._close()
        self._open()
        out: Dict[str, Any] = {"energy_j": m.energy_j, "energy_duration_s": m.duration_s,
                               "energy_avg_power_w": m.avg_power_w,
                               "energy_g_co2e": m.g_co2e, "energy_estimated": m.estimated,
                               "energy_total_j": self.total_j}
        tokens = int(getattr(state, "num_input_tokens_seen", 0) or 0)
        if tokens > self._tokens0 and m.energy_j is not None:
            out["energy_j_per_token"] = m.energy_j / (tokens - self._tokens0)
        self._tokens0 = tokens
        return out

    def on_log(self, args: Any, state: Any, control: Any, logs: Optional[Dict[str, Any]] = None,
               **kw: Any) -> None:
        if self.meter is None or not self.meter.has_window(self._window):
            return
        e = self._energy_logs(state)
        if logs is not None:
            logs.update(e)
        # The entry the trainer already put in its history (trainer_state.json).
        hist = getattr(state, "log_history", None)
        if hist and logs is not None and hist[-1].get("step") == state.global_step:
            hist[-1].update(e)

    def on_train_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        try:
            if self.meter is not None and self.meter.has_window(self._window):
                self._close()
        finally:
            if self.optimizer is not None:
                self.optimizer.close()
            if self._own_meter and self.meter is not None:
                self.meter.close()
                self.meter = None


def add_to_trainer(trainer: Any, callback: GreentrainCallback) -> GreentrainCallback:
    """Puts ``callback`` first among the trainer's callbacks, so that the printers and
    reporters (console, TensorBoard, W&B) see the energy it adds to each log entry."""
    trainer.callback_handler.callbacks.insert(0, callback)
    return callback
