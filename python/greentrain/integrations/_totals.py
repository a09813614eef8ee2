"""A running total of windows' energy and carbon that is never a silent partial sum: once one
window's figure is unknown, the total is unknown (None) with the reason, and the sum of the
known windows stays apart under a name that says it is a lower bound. TotalsMixin gives the
loggers and callbacks (EnergyLogger, the Hugging Face and Lightning callbacks) its properties."""

from __future__ import annotations

from typing import Any, ClassVar, Optional

from ..measurement import Measurement

__all__ = ["EnergyTotal", "TotalsMixin"]


class EnergyTotal:
    """Sums the energy (J) and carbon (gCO2e) of measured windows (see the module docstring)."""

    def __init__(self, what: str = "window") -> None:
        self._what = what
        self.windows = 0
        """Windows added."""
        self.unknown_windows = 0
        """Windows whose energy was unknown."""
        self.known_j = 0.0
        """Energy of the windows of known energy (J): a lower bound of the whole while
        ``unknown_windows`` > 0."""
        self.known_g_co2e = 0.0
        """Carbon of the windows of known carbon (gCO2e): a lower bound likewise."""
        self._g_unknown = 0
        self._first_reason: Optional[str] = None

    def add(self, m: Measurement) -> None:
        """Adds one window's figures."""
        self.windows += 1
        if m.energy_j is None:
            self.unknown_windows += 1
            if self._first_reason is None:
                self._first_reason = m.unknown.get("energy_j") or "no sensor counted"
        else:
            self.known_j += m.energy_j
        if m.g_co2e is None:
            self._g_unknown += 1
        else:
            self.known_g_co2e += m.g_co2e

    @property
    def total_j(self) -> Optional[float]:
        """The energy of every window added (J); None once one of them was unknown."""
        return None if self.unknown_windows else self.known_j

    @property
    def total_g_co2e(self) -> Optional[float]:
        """The carbon of every window added (gCO2e); None once one of them was unknown."""
        return None if self._g_unknown else self.known_g_co2e

    @property
    def unknown_reason(self) -> Optional[str]:
        """Why ``total_j`` is None (how many windows were unknown, and the first one's
        reason); None while it is known."""
        if not self.unknown_windows:
            return None
        return (f"{self.unknown_windows} of {self.windows} {self._what}s had unknown energy "
                f"(the first: {self._first_reason}); known_total_j = {self.known_j:.6g} J is "
                "the sum of the others, a lower bound")


class TotalsMixin:
    """The totals of a logger or callback over its ``self._total`` (an EnergyTotal): the
    properties ``total_j``, ``known_total_j``, ``total_g_co2e``, ``total_unknown_reason`` and
    ``unknown_<_counted>``, the count of windows of unknown energy named by the class attribute
    ``_counted`` (``"steps"``: ``unknown_steps``, ``"intervals"``: ``unknown_intervals``)."""

    _counted: ClassVar[str] = "windows"
    """What the windows are, plural: names the count ``unknown_<_counted>``."""
    _total: EnergyTotal

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        name = f"unknown_{cls._counted}"
        if name not in cls.__dict__:
            setattr(cls, name, property(
                lambda self: self._total.unknown_windows,
                doc=f"{cls._counted.capitalize()} whose energy was unknown."))

    @property
    def total_j(self) -> Optional[float]:
        """Energy of all the windows (J); None once one's energy was unknown (then
        ``total_unknown_reason`` says why and ``known_total_j`` is a lower bound)."""
        return self._total.total_j

    @property
    def known_total_j(self) -> float:
        """Energy of the windows of known energy (J): ``total_j`` while every one was known, a
        lower bound of it otherwise."""
        return self._total.known_j

    @property
    def total_g_co2e(self) -> Optional[float]:
        """Carbon of all the windows (gCO2e); None once one's carbon was unknown."""
        return self._total.total_g_co2e

    @property
    def total_unknown_reason(self) -> Optional[str]:
        """Why ``total_j`` is None; None while it is known."""
        return self._total.unknown_reason
