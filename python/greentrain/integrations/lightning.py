"""A PyTorch Lightning callback that logs energy through the LightningModule's ``log_dict``, so
that every Lightning logger (TensorBoard, CSV, MLflow, W&B, ...) records it.

    import lightning as L
    from greentrain.integrations.lightning import GreentrainLightningCallback

    meter = greentrain.Meter()
    trainer = L.Trainer(callbacks=[GreentrainLightningCallback(meter)], logger=TensorBoardLogger(...))
    trainer.fit(model, loader)

Every training batch gets one meter window; at each batch it logs (``on_step=True``, so the
logger writes them every ``log_every_n_steps`` as it does the loss):
``energy/step_j`` (J of that batch), ``energy/total_j`` and ``energy/total_g_co2e`` (since
fitting began), ``energy/avg_power_w`` (W over the batch, when defined) and
``energy/estimated`` (1 when part of the figure is an estimate). A batch whose energy is unknown
(no sensor counted) logs no figure and is counted in ``unknown_steps``; from then on the totals
are unknown too (``energy/total_j`` is no longer logged, ``callback.total_j`` is None with
``total_unknown_reason``), never a partial sum: ``known_total_j`` is the sum of the known
batches and gaps, a lower bound. Between batches (data
loading, validation) the energy goes into the next logged total, so ``energy/total_j`` covers
all of fitting up to its step; what comes after the last batch (the end of fitting) is in
``tail_j``. Works with ``lightning`` (``import lightning as L``) and with
``pytorch_lightning``.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

try:  # the unified package first, then the older one
    from lightning.pytorch.callbacks import Callback
except ImportError:  # pragma: no cover - depends on what is installed
    from pytorch_lightning.callbacks import Callback  # type: ignore[no-redef]

from ..measurement import Measurement
from ..meter import Meter
from ._totals import EnergyTotal, TotalsMixin

__all__ = ["GreentrainLightningCallback"]


class GreentrainLightningCallback(TotalsMixin, Callback):  # type: ignore[misc]
    """Logs each training batch's energy through ``pl_module.log_dict`` (module docstring).
    Totals from the start of fitting to the last batch, over the batches and the gaps between
    them (TotalsMixin): ``total_j`` (the last ``total_j`` logged), ``known_total_j``,
    ``total_g_co2e``, ``unknown_steps``, ``total_unknown_reason``.

    Args:
        meter: the Meter (default: a new ``greentrain.Meter()``, closed when fitting ends).
        prefix: prefix of the logged names (default ``"energy/"``).
        optimizer: a PowerLimitOptimizer driven from the batches and epochs.
    """

    _counted = "steps"  # batches and the gaps between them
    unknown_steps: int  # the property TotalsMixin makes, for type checkers

    def __init__(self, meter: Optional[Meter] = None, prefix: str = "energy/",
                 optimizer: Any = None) -> None:
        super().__init__()
        self.meter = meter
        self._own_meter = meter is None
        self.prefix = prefix
        self.optimizer = optimizer
        self._total = EnergyTotal("window")
        self.tail_j: Optional[float] = None
        """Energy after the last batch to the end of fitting (J), not logged; None when
        unknown."""
        self.logged: List[Dict[str, float]] = []
        """What was logged at each batch (name -> value), in order."""
        self._window = f"greentrain.lightning@{id(self):x}"
        self._gap = f"greentrain.lightning.gap@{id(self):x}"

    def _name(self, key: str) -> str:
        return self.prefix + key

    def _add(self, m: Measurement) -> None:
        self._total.add(m)

    def on_fit_start(self, trainer: Any, pl_module: Any) -> None:
        if self.meter is None:
            self.meter = Meter()
        self.meter.begin_window(self._gap)  # from here to the first batch

    def on_train_batch_start(self, trainer: Any, pl_module: Any, batch: Any,
                             batch_idx: int) -> None:
        assert self.meter is not None
        if self.optimizer is not None:
            self.optimizer.on_step_begin()
        if self.meter.has_window(self._gap):
            self._add(self.meter.end_window(self._gap))
        self.meter.begin_window(self._window)

    def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any,
                           batch_idx: int) -> None:
        assert self.meter is not None
        m = self.meter.end_window(self._window)
        self.meter.begin_window(self._gap)
        self._add(m)
        if m.energy_j is None:
            return
        d: Dict[str, float] = {self._name("step_j"): float(m.energy_j),
                               self._name("estimated"): 1.0 if m.estimated else 0.0}
        for k, v in (("total_j", self.total_j), ("total_g_co2e", self.total_g_co2e),
                     ("avg_power_w", m.avg_power_w)):
            if v is not None:  # unknown: left out, never 0
                d[self._name(k)] = float(v)
        self.logged.append(d)
        pl_module.log_dict(d, on_step=True, on_epoch=False, prog_bar=False, logger=True)

    def on_train_epoch_end(self, trainer: Any, pl_module: Any) -> None:
        if self.optimizer is not None:
            self.optimizer.on_epoch_end()

    def on_fit_end(self, trainer: Any, pl_module: Any) -> None:
        try:
            if self.meter is not None and self.meter.has_window(self._gap):
                self.tail_j = self.meter.end_window(self._gap).energy_j
        finally:
            if self.optimizer is not None:
                self.optimizer.close()
            if self._own_meter and self.meter is not None:
                self.meter.close()
                self.meter = None
