"""A helper for plain training loops (PyTorch or other): one energy window per step.

    meter = greentrain.Meter(sync=torch.cuda.synchronize if torch.cuda.is_available() else None)
    log = EnergyLogger(meter, print_every=10)
    for batch in loader:
        with log.step(tokens=batch.numel()):
            loss = model(batch).loss; loss.backward(); opt.step(); opt.zero_grad()
    print(log.total_j, log.joules_per_token)

To TensorBoard and MLflow: ``EnergyLogger(meter, writer=SummaryWriter(...), mlflow=mlflow)``
writes each step's ``energy/step_j``, ``energy/total_j``, ``energy/total_g_co2e``,
``energy/avg_power_w`` and ``energy/j_per_token`` (the figures that are known) at the step
number; ``log_measurement(m, writer=..., mlflow=..., step=...)`` does it for any window.

Unknown is never 0: a step whose energy is unknown (no sensor counted, a measured process that
ended) writes no ``step_j``, and from then on the totals are unknown too: ``log.total_j`` is
None with ``log.total_unknown_reason``, ``energy/total_j`` is no longer written, and
``log.known_total_j`` keeps the sum of the known steps, a lower bound.
"""

from __future__ import annotations

import numbers
import sys
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterator, List, Optional

from ..measurement import Measurement
from ..meter import Meter
from ._totals import EnergyTotal, TotalsMixin

__all__ = ["EnergyLogger", "StepRecord", "log_measurement"]


def _send(values: Dict[str, float], step: int, writer: Any, mlflow: Any) -> None:
    if writer is not None:
        for k, v in values.items():
            writer.add_scalar(k, v, step)
    if mlflow is not None:
        mlflow.log_metrics(values, step=step)


def log_measurement(m: Measurement, writer: Any = None, mlflow: Any = None, step: int = 0,
                    prefix: str = "energy/") -> Dict[str, float]:
    """Writes one window's known figures to a TensorBoard ``SummaryWriter`` (``add_scalar``)
    and/or MLflow (the ``mlflow`` module, or anything with ``log_metrics(dict, step=)``) at
    ``step``: ``<prefix>j``, ``<prefix>duration_s``, ``<prefix>avg_power_w``,
    ``<prefix>g_co2e`` (unknown figures are left out). Returns what was written."""
    values = {f"{prefix}{k}": float(v) for k, v in (
        ("j", m.energy_j), ("duration_s", m.duration_s), ("avg_power_w", m.avg_power_w),
        ("g_co2e", m.g_co2e)) if v is not None}
    _send(values, step, writer, mlflow)
    return values


@dataclass(frozen=True)
class StepRecord:
    """The energy of one training step."""

    step: int
    """0-based step index."""
    duration_s: float
    """Step time (s)."""
    energy_j: Optional[float]
    """Energy of the step over the meter's counted domains (J); None when unknown."""
    tokens: Optional[float]
    """Tokens processed in the step, when given."""
    joules_per_token: Optional[float]
    """energy_j / tokens (J/token); None without tokens or energy."""
    avg_power_w: Optional[float]
    """Average power over the step (W); None when the step is shorter than a sensor's
    refresh period."""
    estimated: bool
    """True when part of the energy is an estimate."""
    measurement: Measurement
    """The full measurement (domains, flags, carbon)."""


class EnergyLogger(TotalsMixin):
    """One meter window per training step; keeps a StepRecord per step. Totals (TotalsMixin):
    ``total_j``, ``known_total_j``, ``total_g_co2e``, ``unknown_steps``,
    ``total_unknown_reason``.

    Args:
        meter: the Meter to measure with.
        optimizer: a PowerLimitOptimizer to drive (its on_step_begin is called at each step).
        print_every: print a line every this many steps (0: never); a whole number >= 0.
        print_fn: where lines go (default: print to stderr).
        keep: keep at most this many records (oldest dropped; totals keep counting); >= 0.
        writer: a TensorBoard ``SummaryWriter`` (or anything with ``add_scalar``).
        mlflow: the ``mlflow`` module (or anything with ``log_metrics(dict, step=)``), with a
            run active.
        log_every: write to ``writer``/``mlflow`` every this many steps, >= 1 (the totals
            always cover every step).
        prefix: prefix of the written names.
    """

    _counted = "steps"
    unknown_steps: int  # the property TotalsMixin makes, for type checkers

    def __init__(self, meter: Meter, optimizer: Any = None, print_every: int = 0,
                 print_fn: Optional[Callable[[str], Any]] = None, keep: int = 100000,
                 writer: Any = None, mlflow: Any = None, log_every: int = 1,
                 prefix: str = "energy/") -> None:
        # counts of steps and records: a negative one did nothing or the wrong thing silently
        for name, value, least in (("print_every", print_every, 0), ("keep", keep, 0),
                                   ("log_every", log_every, 1)):
            if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < least:
                raise ValueError(f"EnergyLogger {name}={value!r}: expected a whole number >= "
                                 f"{least}")
        self.meter = meter
        self.optimizer = optimizer
        self.print_every = print_every
        self.print_fn = print_fn or (lambda s: print(s, file=sys.stderr))
        self.keep = keep
        self.records: List[StepRecord] = []
        self.steps = 0
        self._total = EnergyTotal("step")
        self.total_s = 0.0
        self.total_tokens = 0.0
        """Tokens of the steps with known energy (steps given no tokens add none)."""
        self._tokens_j = 0.0  # energy of the steps with known energy and tokens (J)
        self.writer = writer
        self.mlflow = mlflow
        self.log_every = log_every
        self.prefix = prefix
        self._window = f"greentrain.step@{id(self):x}"

    def begin(self) -> None:
        """Starts a step (drives the optimizer, then opens the step's window)."""
        if self.optimizer is not None:
            self.optimizer.on_step_begin()
        self.meter.begin_window(self._window)

    def end(self, tokens: Optional[float] = None) -> StepRecord:
        """Ends the step opened by begin(); ``tokens``: tokens it processed."""
        m = self.meter.end_window(self._window)
        jpt = m.energy_j / tokens if (m.energy_j is not None and tokens) else None
        r = StepRecord(step=self.steps, duration_s=m.duration_s, energy_j=m.energy_j,
                       tokens=tokens, joules_per_token=jpt, avg_power_w=m.avg_power_w,
                       estimated=m.estimated, measurement=m)
        self.steps += 1
        self.total_s += m.duration_s
        self._total.add(m)
        if m.energy_j is not None and tokens:
            self.total_tokens += tokens
            self._tokens_j += m.energy_j
        self.records.append(r)
        if len(self.records) > self.keep:
            del self.records[0]
        if self.print_every and self.steps % self.print_every == 0:
            self.print_fn(self.line(r))
        if (self.writer is not None or self.mlflow is not None) and \
                self.steps % self.log_every == 0:
            self._write(r)
        return r

    def _write(self, r: StepRecord) -> None:
        p = self.prefix
        values: Dict[str, float] = {}
        for k, v in (("step_j", r.energy_j), ("total_j", self.total_j),
                     ("total_g_co2e", self.total_g_co2e), ("avg_power_w", r.avg_power_w),
                     ("j_per_token", r.joules_per_token)):
            if v is not None:
                values[p + k] = float(v)
        _send(values, r.step, self.writer, self.mlflow)

    @contextmanager
    def step(self, tokens: Optional[float] = None) -> Iterator[None]:
        """``with logger.step(tokens=n): ...``: one step (the window ends if the body raises,
        and the exception goes on)."""
        self.begin()
        try:
            yield
        finally:
            self.end(tokens)

    @property
    def joules_per_token(self) -> Optional[float]:
        """J / token over the steps with known energy and tokens (their joules over their
        tokens: a step given no tokens counts in neither); None if there is no such step."""
        return self._tokens_j / self.total_tokens if self.total_tokens > 0 else None

    @staticmethod
    def line(r: StepRecord) -> str:
        """``step 10: 0.52 s, 61.3 J, 118 W, 0.0150 J/token (estimated)``."""
        e = "energy unknown" if r.energy_j is None else f"{r.energy_j:.4g} J"
        p = "" if r.avg_power_w is None else f", {r.avg_power_w:.4g} W"
        t = "" if r.joules_per_token is None else f", {r.joules_per_token:.4g} J/token"
        return f"step {r.step}: {r.duration_s:.4g} s, {e}{p}{t}" + \
            (" (estimated)" if r.estimated else "")
