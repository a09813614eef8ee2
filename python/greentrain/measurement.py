"""Measurements and sensor descriptions, as the C++ energy module makes them.

Units everywhere: seconds (s), joules (J), watts (W), grams of CO2-equivalent (gCO2e).
A figure that could not be measured is ``None``, never 0, and ``unknown[field]`` says why.
"""

from __future__ import annotations

import dataclasses
import os
import platform
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional

from . import _core

__all__ = ["DomainMeasurement", "Measurement", "SensorInfo", "codecarbon_columns"]


def _power_reasons(flags: List[str]) -> str:
    why = [f for f in flags if "power undefined" in f]
    return "; ".join(why) if why else "no sampling interval was long enough to define it"


@dataclass(frozen=True)
class DomainMeasurement:
    """The energy of one sensor (one domain: a GPU, a CPU package, DRAM, the platform)."""

    sensor: str
    """Sensor name, e.g. ``"nvml:0"``, ``"rapl:package-0"``, ``"cpu-estimate"``."""
    domain: str
    """``"gpu"``, ``"cpu"``, ``"ram"`` or ``"psys"``."""
    index: int
    """The device's number in its domain: a GPU's position among the visible GPUs (CUDA's
    numbering), a CPU package's number; 0 for machine-wide sensors (estimates, psys)."""
    method: str
    """``"counter"``, ``"integrated samples"`` or ``"estimate"``."""
    estimated: bool
    """True when the figure is modelled (TDP x utilization, W per GB), not read from hardware."""
    energy_j: float
    """Energy over the window (J), >= 0; includes filled intervals (see ``untrusted_s``)."""
    g_co2e: float
    """This device's carbon (gCO2e): its energy integrated against the grid intensity."""
    avg_power_w: Optional[float]
    """energy_j / duration (W); None when the window is shorter than the sensor's refresh."""
    peak_power_w: Optional[float]
    """Highest power over one sampling interval (W); None when avg_power_w is None."""
    wraps: int
    """Counter wraps corrected inside the window."""
    untrusted_s: float
    """Seconds whose energy is a fill (last trusted power x time), not a reading (s)."""
    incomplete: bool
    """Some seconds had no trusted power at all: energy_j is then a lower bound."""
    flags: List[str]
    """Odd cases, in words."""
    unknown: Dict[str, str] = field(default_factory=dict)
    """Field name -> why it is None."""

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "DomainMeasurement":
        unknown: Dict[str, str] = {}
        avg = d.get("avg_power_w")
        peak = d.get("peak_power_w")
        if avg is None:
            unknown["avg_power_w"] = _power_reasons(list(d.get("flags", [])))
            if not peak:
                peak = None
                unknown["peak_power_w"] = unknown["avg_power_w"]
        return cls(sensor=d["sensor"], domain=d["domain"], index=int(d.get("index", 0)),
                   method=d["method"], estimated=bool(d["estimated"]),
                   energy_j=float(d["energy_j"]), g_co2e=float(d.get("g_co2e", 0.0)),
                   avg_power_w=avg, peak_power_w=peak, wraps=int(d.get("wraps", 0)),
                   untrusted_s=float(d.get("untrusted_s", 0.0)),
                   incomplete=bool(d.get("incomplete", False)), flags=list(d.get("flags", [])),
                   unknown=unknown)


_NO_SENSOR = "no sensor counted"
"""The start of the C++ meter's flag for a window no sensor was counted in."""


def _energy_unknown_reason(d: Mapping[str, Any], flags: List[str]) -> str:
    """Why a window's energy is unknown, as the CLI says it (``energy_unknown_reason`` of the
    C++ to_json), after "no sensor counted: " when that is the case; without that field (a
    dict made elsewhere), the flags that concern the energy, never the others (carbon)."""
    why = d.get("energy_unknown_reason") or ""
    no_sensor = any(f.startswith(_NO_SENSOR) for f in flags)
    if why:
        return f"{_NO_SENSOR}: {why}" if no_sensor else why
    about_energy = [f for f in flags if f.startswith((_NO_SENSOR, "energy unknown"))]
    return "; ".join(about_energy) or "no sensor was counted (greentrain.sensors() says why)"


def _normalize(d: Mapping[str, Any]) -> Dict[str, Any]:
    """The C++ to_json's dict with unknown figures as None and their reasons in "unknown"."""
    out = dict(d)
    flags = list(d.get("flags", []))
    unknown: Dict[str, str] = dict(d.get("unknown") or {})
    if not d.get("domains"):
        # the energy's reason, not every flag (a carbon series' gap says nothing of it)
        why = _energy_unknown_reason(d, flags)
        for k in ("energy_j", "g_co2e", "avg_power_w", "peak_power_w"):
            out[k] = None
            unknown.setdefault(k, why)
    elif d.get("avg_power_w") is None:
        why = "; ".join(f for f in flags if "power undefined" in f) or \
            "the window is shorter than a sensor's refresh period"
        unknown.setdefault("avg_power_w", why)
        if not d.get("peak_power_w"):
            out["peak_power_w"] = None
            unknown.setdefault("peak_power_w", why)
    out["flags"] = flags
    out["unknown"] = unknown
    return out


class Measurement:
    """One measured window (``Meter.end_window``): time, energy per domain and in all, power,
    carbon, and how each figure was made. Read-only. The figures are converted from the C++
    measurement when first read, so that ending a window costs the loop little."""

    __slots__ = ("_raw", "_d", "_domains")

    def __init__(self, raw: Any = None, d: Optional[Mapping[str, Any]] = None) -> None:
        self._raw = raw
        self._d: Optional[Dict[str, Any]] = None if d is None else _normalize(d)
        self._domains: Optional[List[DomainMeasurement]] = None

    @classmethod
    def _from_core(cls, raw: Any) -> "Measurement":
        return cls(raw=raw)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Measurement":
        """Builds a Measurement from ``to_dict()``'s output (or the C++ to_json)."""
        return cls(d=d)

    def _get(self, k: str) -> Any:
        if self._d is None:
            self._d = _normalize(self._raw.to_dict())
        return self._d.get(k)

    @property
    def name(self) -> str:
        """The window's name."""
        return self._get("name")

    @property
    def start_unix_s(self) -> float:
        """Wall clock at begin_window (s since 1970-01-01 UTC)."""
        return self._get("start_unix_s")

    @property
    def duration_s(self) -> float:
        """Length of the window on the meter's monotonic clock (s)."""
        return self._get("duration_s")

    @property
    def energy_j(self) -> Optional[float]:
        """Energy of all counted domains (J); None when no sensor was counted."""
        return self._get("energy_j")

    @property
    def avg_power_w(self) -> Optional[float]:
        """energy_j / duration_s (W); None when undefined (window shorter than a sensor's
        refresh period)."""
        return self._get("avg_power_w")

    @property
    def peak_power_w(self) -> Optional[float]:
        """Highest total power over one sampling interval (W); None when undefined."""
        return self._get("peak_power_w")

    @property
    def g_co2e(self) -> Optional[float]:
        """Carbon (gCO2e): the energy integrated against the grid intensity over the window."""
        return self._get("g_co2e")

    @property
    def carbon_source(self) -> str:
        """The intensity used, e.g. ``"constant 475 gCO2e/kWh (world average)"``."""
        return self._get("carbon_source")

    @property
    def estimated(self) -> bool:
        """True when any counted figure is an estimate."""
        return bool(self._get("estimated"))

    @property
    def method(self) -> str:
        """How each counted sensor's figure was made, in words."""
        return self._get("method")

    @property
    def flags(self) -> List[str]:
        """Odd cases (wraps, failed readings, short windows, another reader), in words."""
        return list(self._get("flags"))

    @property
    def unknown(self) -> Dict[str, str]:
        """Field name -> why it is None."""
        return dict(self._get("unknown"))

    @property
    def domains(self) -> List[DomainMeasurement]:
        """Per counted sensor."""
        if self._domains is None:
            self._domains = [DomainMeasurement.from_dict(x) for x in self._get("domains") or []]
        return list(self._domains)

    def energy_j_of(self, domain: str) -> Optional[float]:
        """Energy (J) of the counted sensors of one domain kind (``"gpu"``, ``"cpu"``,
        ``"ram"``, ``"psys"``); None when no counted sensor measures that domain."""
        ds = [d for d in self.domains if d.domain == domain]
        return sum(d.energy_j for d in ds) if ds else None

    @property
    def energy_j_by_domain(self) -> Dict[str, float]:
        """Energy (J) per domain kind, over the counted sensors (absent kinds are unknown)."""
        out: Dict[str, float] = {}
        for d in self.domains:
            out[d.domain] = out.get(d.domain, 0.0) + d.energy_j
        return out

    @property
    def g_co2e_by_domain(self) -> Dict[str, float]:
        """Carbon (gCO2e) per domain kind, over the counted sensors; sums to ``g_co2e``."""
        out: Dict[str, float] = {}
        for d in self.domains:
            out[d.domain] = out.get(d.domain, 0.0) + d.g_co2e
        return out

    def _by_index(self, domain: str) -> Dict[int, float]:
        out: Dict[int, float] = {}
        for d in self.domains:
            if d.domain == domain:
                out[d.index] = out.get(d.index, 0.0) + d.energy_j
        return out

    @property
    def gpu_energy_j(self) -> Dict[int, float]:
        """Energy (J) per GPU, by its index among the visible GPUs (Zeus's ``gpu_energy``):
        ``m.gpu_energy_j[0]``. A GPU that was not measured is absent (see ``flags``)."""
        return self._by_index("gpu")

    @property
    def cpu_energy_j(self) -> Dict[int, float]:
        """Energy (J) per CPU package (RAPL package N -> N; the machine-wide estimate is 0),
        as Zeus's ``cpu_energy``."""
        return self._by_index("cpu")

    @property
    def ram_energy_j(self) -> Dict[int, float]:
        """Energy (J) of memory per package (RAPL dram; the estimate is 0), as Zeus's
        ``dram_energy``."""
        return self._by_index("ram")

    _FIELDS = ("name", "start_unix_s", "duration_s", "energy_j", "avg_power_w", "peak_power_w",
               "g_co2e", "carbon_source", "estimated", "method", "flags")

    def to_dict(self) -> Dict[str, Any]:
        """Plain data (JSON-ready): every figure, unknown ones as None with the reasons in
        ``unknown``, ``domains`` and ``energy_j_by_domain``."""
        d = {k: getattr(self, k) for k in self._FIELDS}
        d["domains"] = [dataclasses.asdict(x) for x in self.domains]
        d["energy_j_by_domain"] = self.energy_j_by_domain
        d["g_co2e_by_domain"] = self.g_co2e_by_domain
        d["unknown"] = self.unknown
        return d

    def __repr__(self) -> str:
        e = "unknown" if self.energy_j is None else f"{self.energy_j:.6g} J"
        return (f"Measurement({self.name!r}, {self.duration_s:.6g} s, {e}"
                + (", estimated" if self.estimated else "") + ")")

    def _core_measurement(self) -> Any:
        if self._raw is None:
            raise ValueError("this Measurement was not made by a Meter (from_dict): the "
                             "CodeCarbon row needs the meter's own record")
        return self._raw

    def to_codecarbon_row(self, project_name: str = "greentrain", run_id: str = "",
                          experiment_id: str = "", region: str = "",
                          country_name: str = "", country_iso_code: str = "",
                          pue: float = 1.0, tracking_mode: str = "machine",
                          wue: Optional[float] = None) -> Dict[str, str]:
        """The window as one row of CodeCarbon's ``emissions.csv`` (column -> text; CodeCarbon
        3.x's 38 columns and units: duration s, emissions kg CO2e, powers W, energies kWh, water
        L), then ``energy_method``, ``energy_flags`` (so that an estimate stays marked),
        ``carbon_intensity`` and ``carbon_source``. ``pue`` (in [1, 10]) multiplies the energies
        and the emissions as CodeCarbon's does; ``wue`` (L/kWh) gives ``water_consumed``, empty
        when None. ``run_id`` empty: a random UUID4. ``region``: CodeCarbon's region column,
        the province, state or cloud region the figures are for (empty: none named).
        ``python_version`` is this interpreter's, as CodeCarbon writes it."""
        import csv
        import io
        line = self._core_measurement().codecarbon_row(dict(
            project_name=project_name, run_id=run_id, experiment_id=experiment_id, region=region,
            country_name=country_name, country_iso_code=country_iso_code, pue=pue,
            tracking_mode=tracking_mode, wue=wue, python_version=platform.python_version()))
        values = next(csv.reader(io.StringIO(line)))
        return dict(zip(codecarbon_columns(), values))

    def append_to_codecarbon_csv(self, path: "os.PathLike[str] | str | bytes",
                                 project_name: str = "greentrain", run_id: str = "",
                                 region: str = "", experiment_id: str = "",
                                 country_name: str = "", country_iso_code: str = "",
                                 pue: float = 1.0, wue: Optional[float] = None,
                                 tracking_mode: str = "machine") -> List[str]:
        """Appends the row to the CSV at ``path`` (with the header when the file is new).
        Safe with many writers at once (processes, threads): the row is appended under an
        exclusive lock and never lost. A file with another header (CodeCarbon's own, any
        version or column order) gets the row under that header: the columns both have, the
        file's others empty; a file that is not an emissions CSV raises ``greentrain.Error``
        naming it and is left as it was (never moved or overwritten). Returns the columns of
        this row that the file's header lacks (not written; empty when all were)."""
        r = self._core_measurement().append_codecarbon_csv(
            os.fsencode(path), dict(project_name=project_name, run_id=run_id, region=region,
                                    experiment_id=experiment_id, country_name=country_name,
                                    country_iso_code=country_iso_code, pue=pue, wue=wue,
                                    tracking_mode=tracking_mode,
                                    python_version=platform.python_version()))
        return list(r["left_out"])

    def summary(self, tokens: Optional[float] = None) -> str:
        """One line, e.g. ``"12.3 W, 0.45 J/token (estimated)"``."""
        return self._core_measurement().summary_line(tokens)


def codecarbon_columns() -> List[str]:
    """CodeCarbon 3.x's emissions.csv columns, in its order, then energy_method, energy_flags,
    carbon_intensity and carbon_source."""
    return list(_core.codecarbon_columns())


@dataclass(frozen=True)
class SensorInfo:
    """One sensor looked for on this machine (``greentrain sensors``)."""

    name: str
    """Unique name, e.g. ``"rapl:package-0"``, ``"nvml:0"``, ``"cpu-estimate"``."""
    domain: str
    """``"gpu"``, ``"cpu"``, ``"ram"`` or ``"psys"``."""
    index: int
    """The device's number in its domain (GPU position, CPU package); 0 machine-wide."""
    device: str
    """Human description (GPU name and UUID, powercap path, CPU model)."""
    kind: str
    """``"energy counter"``, ``"power gauge"`` or ``"estimate"``."""
    unit: str
    """Native unit of the raw value: ``"uJ"``, ``"mJ"``, ``"mW"``, ``"W"``."""
    available: bool
    """False: it cannot be read here; ``reason`` says why."""
    counted: bool
    """False: readable but left out so that no joule is counted twice."""
    method: str
    """How its number is produced, in words."""
    reason: str
    """Why unavailable or not counted (empty otherwise)."""
    refresh_period_s: Optional[float]
    """The hardware updates its value this often (s); None for a sensor that was not found."""
    wrap_j: Optional[float]
    """A counter wraps to 0 after this many joules (J); None when it does not or is unknown."""

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "SensorInfo":
        return cls(**{f.name: d[f.name] for f in dataclasses.fields(cls)})

    def to_dict(self) -> Dict[str, Any]:
        return dataclasses.asdict(self)
