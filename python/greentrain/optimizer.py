"""The power-limit optimizer: ``greentrain tune``'s search, driven by a Python training loop.

    meter = greentrain.Meter()
    with greentrain.PowerLimitOptimizer(meter, objective="cost") as plo:
        for epoch in range(epochs):
            for batch in loader:
                plo.on_step_begin()
                train_step(batch)
            plo.on_epoch_end()

Each candidate limit, from the devices' maximum down to their minimum in ``step_w`` steps, is
applied to all devices; ``warmup_steps`` steps run, then ``profile_steps`` steps are measured
with the meter (J over all its counted domains, s). The choice minimises energy, time, Zeus's
cost eta*E + (1-eta)*P_max*T, or takes the lowest limit within ``max_slowdown`` of the time at
the highest limit (Zeus, NSDI 2023). The chosen limit then stays in force until ``close()``.
The search is the C++ one (tune/optimizer.h), driven from this loop's thread. The limits in
force before are restored on every exit path: ``close()``, the end of a ``with`` block
(exceptions and KeyboardInterrupt included), garbage collection, interpreter exit, and
SIGINT/SIGTERM (a C++ handler restores the limits first, then Python's handler raises
KeyboardInterrupt). Only SIGKILL cannot be caught: then the limit stays until reset
(``nvidia-smi -pl``) or reboot.
"""

from __future__ import annotations

import atexit
import math
import numbers
import weakref
from typing import Any, Dict, List, Optional, Sequence, Union

from . import _core
from .meter import Meter

__all__ = ["PowerLimitOptimizer", "power_limit_devices"]

_live: "weakref.WeakSet[PowerLimitOptimizer]" = weakref.WeakSet()


@atexit.register
def _close_all() -> None:
    for o in list(_live):
        o.close()


def power_limit_devices(kind: str = "auto", powercap_root: str = "") -> List[Any]:
    """The devices whose power limit can be set: ``"nvml"`` (the GPUs visible to this process),
    ``"rapl"`` (CPU package zones under powercap_root), or ``"auto"`` (GPUs if any, else RAPL).
    Each has ``name``, ``limit_w``, ``min_limit_w``, ``max_limit_w`` (W) and
    ``permission_problem()``. Raises greentrain.Error when none is found."""
    return list(_core.open_power_limit_devices(kind, powercap_root))


def _check_range(name: str, value: Any, lo: float, hi: float) -> None:
    """Raises ValueError naming `name` unless value is a number in [lo, hi] (NaN is not)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not lo <= value <= hi:
        raise ValueError(f"{name}={value!r}: expected a number in [{lo}, {hi}]")


def _refuse_unread_options(objective: str, eta: Optional[float],
                           max_slowdown: Optional[float]) -> None:
    """Raises ValueError for ``eta`` beside an objective other than "cost", or
    ``max_slowdown`` beside one other than "slowdown": the search would not read it (the
    refusal of ``greentrain tune --eta/--max-slowdown``, cli/cmd_tune.cpp)."""
    if eta is not None and objective != "cost":
        raise ValueError(f"eta={eta!r} applies to objective='cost' only (the energy weight of "
                         f"Zeus's cost); objective={objective!r} does not choose by it; "
                         "expected objective='cost' with it, or no eta")
    if max_slowdown is not None and objective != "slowdown":
        raise ValueError(f"max_slowdown={max_slowdown!r} applies to objective='slowdown' only "
                         f"(the time factor it allows); objective={objective!r} does not read "
                         "it; expected objective='slowdown' (or no objective) with it, or no "
                         "max_slowdown")


class PowerLimitOptimizer:
    """Searches the power limit from a training loop's steps (see the module docstring).

    Args:
        meter: measures the profiled steps (its windows are independent of yours).
        objective: ``"cost"`` (Zeus's eta*E + (1-eta)*P_max*T), ``"energy"`` (J per step),
            ``"time"`` (s per step), or ``"slowdown"`` (set by ``max_slowdown``); None (the
            default): ``"slowdown"`` when ``max_slowdown`` is given, else ``"cost"``.
        max_slowdown: choose the lowest limit whose time per step is at most this factor of the
            time at the highest limit, >= 1 (None: 1.1); read by ``"slowdown"`` only, and
            implies it when ``objective`` is not given.
        eta: Zeus's energy/time weight in [0, 1] (None: 0.5); read by ``"cost"`` only.
        devices: ``"auto"``, ``"nvml"``, ``"rapl"``, or devices from ``power_limit_devices()``.
        powercap_root: RAPL's powercap folder for ``"rapl"``/``"auto"``.
        step_w: distance between candidate limits (W).
        warmup_steps: steps run and not measured at each limit.
        profile_steps: steps measured at each limit.
        profile_path: a JSON profile to reuse when it was made on the same devices and
            candidates (then nothing is profiled), or to write after the search.
        apply_best: keep the chosen limit in force after the search, until ``close()``.
        verbose: print a line per candidate limit to stderr.

    Raises:
        PermissionError: this process may not set the limits (e.g. not root); nothing was
            changed. The message lists each device and what is needed.
        ValueError: an argument out of its range or not known (the message names it):
            ``objective``, ``eta``, ``max_slowdown``, ``step_w``, ``warmup_steps``,
            ``profile_steps``; ``eta`` beside an objective other than ``"cost"`` or
            ``max_slowdown`` beside one other than ``"slowdown"`` (either would change
            nothing, as ``greentrain tune`` refuses ``--eta`` and ``--max-slowdown``); checked
            before any device is looked for.
        greentrain.Error: no device found, or a bad option found later (the message names
            it).
    """

    def __init__(self, meter: Meter, objective: Optional[str] = None, *,
                 max_slowdown: Optional[float] = None, eta: Optional[float] = None,
                 devices: Union[str, Sequence[Any]] = "auto", powercap_root: str = "",
                 step_w: float = 25.0, warmup_steps: int = 2, profile_steps: int = 5,
                 profile_path: Optional[str] = None, apply_best: bool = True,
                 verbose: bool = True) -> None:
        if objective is None:
            objective = "cost" if max_slowdown is None else "slowdown"
        if not isinstance(objective, str):
            raise ValueError(f"objective={objective!r}: expected 'cost', 'energy', 'time' or "
                             "'slowdown'")
        _core.check_objective(objective)  # ValueError naming it, before any device is opened
        # the ranges of `greentrain tune`, checked before any device is opened (the search
        # would find a bad one only at the first step)
        if eta is not None:
            _check_range("eta", eta, 0, 1)
        if max_slowdown is not None:
            _check_range("max_slowdown", max_slowdown, 1, math.inf)
        _refuse_unread_options(objective, eta, max_slowdown)
        if not (isinstance(step_w, numbers.Real) and math.isfinite(step_w) and step_w > 0):
            raise ValueError(f"step_w={step_w!r}: expected a finite number of W > 0")
        for name, value, least in (("warmup_steps", warmup_steps, 0),
                                   ("profile_steps", profile_steps, 1)):
            if isinstance(value, bool) or not isinstance(value, numbers.Integral) or \
                    not least <= value <= 2**31 - 1:
                raise ValueError(f"{name}={value!r}: expected a whole number of steps in "
                                 f"[{least}, 2147483647]")
        devs = power_limit_devices(devices, powercap_root) if isinstance(devices, str) \
            else list(devices)
        self.meter = meter
        self._tuner: Any = None
        tuner = _core.PowerLimitOptimizer(devs, meter._meter(), objective,
                                          float(eta if eta is not None else 0.5),
                                          float(max_slowdown if max_slowdown is not None else 1.1),
                                          float(step_w), int(warmup_steps), int(profile_steps),
                                          str(profile_path or ""), bool(apply_best), bool(verbose))
        try:
            tuner.check_permission()
        except _core.Error as e:
            raise PermissionError(str(e)) from None
        self._tuner = tuner
        meter._attach(self)
        _live.add(self)

    def on_step_begin(self) -> None:
        """Call at the start of every training step. The first call starts the search (the
        first candidate is applied before the step runs); later ones move it on (a step not
        ended by ``on_step_end`` ends here, so steps are measured from one beginning to the
        next). Does nothing once the search is over. Raises greentrain.Error once if the search
        failed (the limits in force before are then back)."""
        if self._tuner is not None:
            self._tuner.begin_step()

    def on_step_end(self) -> None:
        """Optional, as in Zeus: call when a training step ends, so that the work between steps
        (logging, evaluation) is not measured as the step's. Raises as ``on_step_begin``."""
        if self._tuner is not None:
            self._tuner.end_step()

    def on_epoch_end(self) -> None:
        """Call when an epoch ends (before evaluation or checkpointing): the steps being
        profiled are discarded, and from the next step the limit's ``warmup_steps`` run again
        before its ``profile_steps`` are measured (as Zeus does: an epoch's first steps, with
        its data loader starting, are not what a limit is judged by). An epoch too short for
        warm-up and profile makes the search fail with that reason (raised by the next
        ``on_step_begin``), rather than run forever."""
        if self._tuner is not None:
            self._tuner.epoch_end()

    def close(self) -> None:
        """Stops the search if it runs and restores the limits in force before (also those
        changed for the chosen limit). Idempotent."""
        if self._tuner is not None:
            self._tuner.close()

    @property
    def state(self) -> str:
        """``"idle"`` (no step yet), ``"profiling"``, ``"done"``, ``"closed"`` or ``"failed"``."""
        return self._tuner.state if self._tuner is not None else "closed"

    @property
    def chosen_limit_w(self) -> Optional[float]:
        """The limit the search chose (W), once it is done; None before."""
        return self._tuner.chosen_limit_w if self._tuner is not None else None

    @property
    def devices(self) -> List[str]:
        """Names of the devices searched."""
        return [d.name for d in self._tuner.devices] if self._tuner is not None else []

    def result(self) -> Optional[Dict[str, Any]]:
        """The profile as ``greentrain tune`` saves it (devices, points: limit_w,
        energy_per_step_j, time_per_step_s; chosen_limit_w), once done; None before."""
        return self._tuner.result() if self._tuner is not None else None

    def __enter__(self) -> "PowerLimitOptimizer":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass
