"""A Hugging Face ``transformers`` TrainerCallback that adds energy to the trainer's logs, so
that every reporter (console, TensorBoard, MLflow, W&B, ...) records it.

    meter = greentrain.Meter()
    trainer = Trainer(model=model, args=TrainingArguments(..., report_to=["tensorboard", "mlflow"]),
                      train_dataset=ds, callbacks=[GreentrainCallback(meter)])
    trainer.train()     # every log entry gets energy_j, energy_total_j, energy_g_co2e, ...

Each log entry gets the energy since the previous one: ``energy_j`` (J), ``energy_duration_s``
(s), ``energy_avg_power_w`` (W), ``energy_g_co2e`` (gCO2e), ``energy_estimated`` (1 when part
of the figure is an estimate; a bool in ``log_history``),
``energy_total_j`` and ``energy_total_g_co2e`` (since training began) and, when the trainer
counts input tokens (``include_num_input_tokens_seen=True``), ``energy_j_per_token``.

Order: ``Trainer`` puts the callbacks it is given after its printers and reporters, which would
see each log entry before the energy is in it. This callback moves itself to the front of the
trainer's callbacks when the trainer has been built (``on_init_end``), so passing it in
``callbacks=[...]`` is enough; ``add_to_trainer(trainer, cb)`` does the same for a trainer made
earlier.

Totals: the window of the last interval closes at the trainer's final log entry (the one with
``train_runtime``), before the reporters close their runs, so ``callback.total_j`` is the last
``energy_total_j`` every reporter recorded. A figure that is unknown (no sensor counted, or a
power over an interval shorter than a sensor's refresh period) is None in ``log_history`` and
left out of the entry the reporters get (they take numbers only). Once one interval's energy is
unknown, so are the totals from then on (``energy_total_j`` None, ``callback.total_j`` None
with ``callback.total_unknown_reason``), never a partial sum: ``callback.known_total_j`` is
the sum of the known intervals, a lower bound.

With a PowerLimitOptimizer, its on_step_begin/on_epoch_end are called and it is closed when
training ends.
"""

from __future__ import annotations

import inspect
import warnings
from typing import Any, Dict, List, Optional

from transformers import TrainerCallback

from ..measurement import Measurement
from ..meter import Meter
from ._totals import EnergyTotal, TotalsMixin

__all__ = ["GreentrainCallback", "add_to_trainer"]


class GreentrainCallback(TotalsMixin, TrainerCallback):  # type: ignore[misc]
    """Adds the energy of each logging interval to the trainer's logs (see module docstring).
    Totals over the intervals (TotalsMixin): ``total_j`` (the last ``energy_total_j`` logged),
    ``known_total_j``, ``total_g_co2e``, ``unknown_intervals``, ``total_unknown_reason``.

    Args:
        meter: the Meter (default: a new ``greentrain.Meter()``, closed when training ends).
        optimizer: a PowerLimitOptimizer driven from the trainer's steps and epochs.
    """

    _counted = "intervals"
    unknown_intervals: int  # the property TotalsMixin makes, for type checkers

    def __init__(self, meter: Optional[Meter] = None, optimizer: Any = None) -> None:
        self.meter = meter
        self._own_meter = meter is None
        self.optimizer = optimizer
        self._total = EnergyTotal("interval")
        self.measurements: List[Measurement] = []
        """The Measurement of every logging interval, in order."""
        self._tokens0 = 0
        self._window = f"greentrain.hf@{id(self):x}"

    # -- place: before the printers and reporters -------------------------------------------
    def _move_first(self) -> bool:
        """Moves this callback to the front of the CallbackHandler that is calling it."""
        frame = inspect.currentframe()
        try:
            f = frame.f_back if frame is not None else None
            while f is not None:
                handler = f.f_locals.get("self")
                cbs = getattr(handler, "callbacks", None)
                if isinstance(cbs, list) and any(c is self for c in cbs):
                    if cbs[0] is not self:
                        cbs.remove(self)
                        cbs.insert(0, self)
                    return True
                f = f.f_back
        finally:
            del frame
        return False

    def on_init_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        if not self._move_first():
            warnings.warn("GreentrainCallback could not put itself before the trainer's "
                          "reporters; call greentrain.integrations.add_to_trainer(trainer, cb)",
                          stacklevel=2)

    # -- windows -----------------------------------------------------------------------------
    def _open(self) -> None:
        assert self.meter is not None
        self.meter.begin_window(self._window)

    def _close(self) -> Measurement:
        assert self.meter is not None
        m = self.meter.end_window(self._window)
        self.measurements.append(m)
        self._total.add(m)
        return m

    def on_train_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        self._move_first()
        if self.meter is None:
            self.meter = Meter()
        self._tokens0 = int(getattr(state, "num_input_tokens_seen", 0) or 0)
        if not self.meter.has_window(self._window):
            self._open()

    def on_step_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        if self.optimizer is not None:
            self.optimizer.on_step_begin()

    def on_epoch_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        if self.optimizer is not None:
            self.optimizer.on_epoch_end()

    def _energy_logs(self, state: Any, last: bool) -> Dict[str, Any]:
        m = self._close()
        if not last:
            self._open()
        out: Dict[str, Any] = {"energy_j": m.energy_j, "energy_duration_s": m.duration_s,
                               "energy_avg_power_w": m.avg_power_w,
                               "energy_g_co2e": m.g_co2e, "energy_estimated": m.estimated,
                               "energy_total_j": self.total_j,
                               "energy_total_g_co2e": self.total_g_co2e}
        tokens = int(getattr(state, "num_input_tokens_seen", 0) or 0)
        if tokens > self._tokens0 and m.energy_j is not None:
            out["energy_j_per_token"] = m.energy_j / (tokens - self._tokens0)
        self._tokens0 = tokens
        return out

    def on_log(self, args: Any, state: Any, control: Any, logs: Optional[Dict[str, Any]] = None,
               **kw: Any) -> None:
        if self.meter is None or not self.meter.has_window(self._window):
            return
        # the trainer's last entry (train_runtime, ...) closes the last interval: the reporters
        # still have their runs open then
        last = logs is not None and "train_runtime" in logs
        e = self._energy_logs(state, last)
        if logs is not None:  # the reporters take numbers only: unknown figures are left out,
            # and the flag is 0/1 (MLflow refuses a bool, and with it the whole batch of metrics)
            logs.update({k: int(v) if isinstance(v, bool) else v for k, v in e.items()
                         if v is not None})
        # the entry the trainer already put in its history (trainer_state.json): unknown is null
        hist = getattr(state, "log_history", None)
        if hist and logs is not None and hist[-1].get("step") == state.global_step:
            hist[-1].update(e)

    def on_train_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        try:
            if self.meter is not None and self.meter.has_window(self._window):
                self._close()  # training ended without a final log entry
        finally:
            if self.optimizer is not None:
                self.optimizer.close()
            if self._own_meter and self.meter is not None:
                self.meter.close()
                self.meter = None


def add_to_trainer(trainer: Any, callback: GreentrainCallback) -> GreentrainCallback:
    """Puts ``callback`` first among the trainer's callbacks, so that the printers and
    reporters (console, TensorBoard, MLflow, W&B) see the energy it adds to each log entry.
    Passing the callback in ``Trainer(callbacks=[...])`` does this by itself."""
    cbs = trainer.callback_handler.callbacks
    if callback in cbs:
        cbs.remove(callback)
    cbs.insert(0, callback)
    return callback
