"""The energy meter: Zeus-style windows over greentrain's C++ Meter.

    meter = greentrain.Meter()                  # GPUs (NVML, ROCm SMI), RAPL, else estimates
    meter.begin_window("step")
    ...work...
    m = meter.end_window("step")                # m.energy_j (J), m.duration_s (s), m.g_co2e

Windows nest and overlap freely (each name has its own start). The sensors are sampled in a
C++ thread every ``interval_ms`` (wraps and dips are corrected there) and at every window
boundary; Python holds no lock while the meter reads them.
"""

from __future__ import annotations

import functools
import itertools
import math
import numbers
import os
import threading
import warnings
import weakref
from contextlib import contextmanager
from typing import (Any, Callable, Dict, Iterator, List, Optional, Sequence, Set, Tuple,
                    TypeVar, Union)

from . import _core
from .measurement import Measurement, SensorInfo

__all__ = ["Meter", "Window", "sensors"]

F = TypeVar("F", bound=Callable[..., Any])

_DOMAINS = ("gpu", "cpu", "ram", "psys")
"""The domain kinds a sensor measures (SensorInfo.domain)."""


def sensors(powercap_root: str = "") -> List[SensorInfo]:
    """Every power or energy sensor looked for on this machine, as ``greentrain sensors``
    lists them: available or not (with the reason), counted or not. ``powercap_root``: RAPL's
    powercap folder (empty: $GT_POWERCAP_ROOT or /sys/class/powercap)."""
    return [SensorInfo.from_dict(d) for d in _core.sensors(powercap_root)]


def _is_country_code(text: str) -> bool:
    """A country code, not a path: 2 or 3 letters that are not an existing file."""
    t = text.strip()
    return 2 <= len(t) <= 3 and t.isalpha() and not os.path.exists(text)


def _carbon_number(text: str) -> Optional[float]:
    """The intensity a numeric string such as ``"300"`` gives (gCO2e/kWh), else None; an
    existing file of that name stays a path."""
    try:
        value = float(text.strip())
    except ValueError:
        return None
    return None if os.path.exists(text) else value


def _carbon_source(carbon: Any) -> Tuple[Optional[float], str, str]:
    """Meter's ``carbon`` argument as (gCO2e/kWh constant, country code, series path), one of
    them set (none: the default). Raises ValueError for a negative, NaN or infinite intensity
    and TypeError, naming ``carbon``, for a type that is none of these (a bool among them)."""
    if isinstance(carbon, str) and not _is_country_code(carbon):
        number = _carbon_number(carbon)
        if number is not None:
            carbon = number
    if isinstance(carbon, numbers.Real) and not isinstance(carbon, bool):
        if not (0 <= carbon < math.inf):  # NaN fails too
            raise ValueError(f"carbon={carbon} gCO2e/kWh: expected a finite number >= 0")
        return float(carbon), "", ""
    if isinstance(carbon, str) and _is_country_code(carbon):
        return None, carbon, ""
    if isinstance(carbon, (str, bytes, os.PathLike)):
        return None, "", os.fsdecode(carbon)
    if carbon is None:
        return None, "", ""
    raise TypeError(f"carbon={carbon!r}: expected a number (gCO2e/kWh), a country code such as "
                    "'DEU', the path of an intensity series, or None (the world average)"
                    + ("; a bool is not an intensity" if isinstance(carbon, bool) else ""))


_carbon_warned: Set[str] = set()
"""The implausible-intensity warnings given so far: each source is warned of once."""


def _warn_implausible_carbon(carbon: Any, carbon_g: Optional[float],
                             messages: Sequence[str]) -> None:
    """Warns (``warnings.warn``, UserWarning) of an intensity outside the plausible
    1..2000 gCO2e/kWh, likely a unit mistake (kg/kWh given as g/kWh), as ``greentrain
    measure``/``train``/``schedule`` warn on stderr (the C++ CarbonIntensity::warnings()):
    once per process for each constant or series."""
    for text in messages:
        if carbon_g is not None:
            text = f"Meter(carbon={carbon!r}): {text}"
        if text not in _carbon_warned:
            _carbon_warned.add(text)
            warnings.warn(text, UserWarning, stacklevel=3)


class Window:
    """A window opened by ``Meter.window()``; ``measurement`` is set when it ends."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.measurement: Optional[Measurement] = None


class Meter:
    """Measures the energy (J), time (s), power (W) and carbon (gCO2e) of named windows.

    Args:
        gpus: GPUs to read, as positions among the visible GPUs (CUDA's numbering after
            CUDA_VISIBLE_DEVICES); None: all visible GPUs; ``[]``: none.
        strict: when ``gpus`` names GPUs and one cannot be read (no NVML or ROCm SMI, no
            driver): True raises greentrain.Error saying why (as Zeus does); False measures
            the rest and puts a flag naming the missing GPUs into every measurement.
        cpu: read the CPU and memory: RAPL counters, else an estimate (CPU TDP x utilization,
            0.375 W per GB of RAM, always marked ``estimated``). False: GPUs only.
        interval_ms: background sampling period, in [1, 3600000] ms; 0: no thread, sensors are
            read only at window boundaries (enough for counters; power gauges want sampling).
        carbon: grid carbon intensity: a number (gCO2e/kWh, constant; a numeric string such as
            ``"300"`` too, unless a file of that name exists); a country's ISO 3166-1
            alpha-3 code such as ``"DEU"`` (its annual average, Our World in Data / Ember 2021
            as in CodeCarbon's table; unknown codes raise, listing near matches); a path to a
            series as grids publish it (greentrain's ``Time,Carbon Intensity`` CSV, an
            Electricity Maps export or API JSON, the UK Carbon Intensity API's JSON, WattTime
            MOER CSV/JSON, an ENTSO-E-style CSV, or any CSV with ``carbon_column``), the format
            detected; or None (475 gCO2e/kWh, the IEA world average CodeCarbon also uses).
            An intensity outside 1..2000 gCO2e/kWh (a constant, or a series' values), most
            often kg/kWh given as g/kWh, is used as given and warned of (``warnings.warn``,
            UserWarning, naming the likely unit mistake) once per process for each source, as
            ``greentrain measure``, ``train`` and ``schedule`` warn of it.
        carbon_format: the series' format when detection is not wanted: ``"greentrain"``,
            ``"electricitymaps"``, ``"uk-carbon-intensity"``, ``"watttime"``, ``"entsoe"``,
            ``"csv"``.
        carbon_column / carbon_time_column: the series' value and time columns (a name or a
            unique part of it, e.g. ``"direct"`` or ``"LCA"`` for Electricity Maps).
        carbon_unit: ``"g/kWh"``, ``"kg/MWh"`` or ``"lbs/MWh"`` (default: the format's). These
            reading options (carbon_format, carbon_column, carbon_time_column, carbon_unit,
            carbon_value) go with a series path only: with a number (gCO2e/kWh), a country
            or None they raise ValueError.
        carbon_value: ``"actual"`` or ``"forecast"`` for sources with both (default: actual
            where the file has it); empty and null values are gaps, flagged in measurements.
        country: the ISO alpha-3 code of the country the carbon figures are for (CodeCarbon's
            country columns); implied by ``carbon="DEU"`` (another country beside it raises
            ValueError).
        carbon_utc_offset_h: the CSV's naive times are local at this offset east of UTC (h);
            refused (ValueError) without carbon=PATH.
        region: a label for the intensity, shown in measurements and CSV rows.
        cpu_tdp_w: per-socket TDP (W) for the CPU estimate, in [1, 2000] as ``measure --tdp``
            and ``energy.cpu_tdp_w`` take it; None or 0: the CPU model's table (else 85 W).
            Anything else (negative, NaN, infinite, above 2000) raises ValueError.
        pid: estimate the CPU and memory share of this process tree, e.g. ``os.getpid()``
            (0: the whole machine, the default). A pid that is not a running process (or is
            negative) raises ValueError; a window during which the process ends has unknown
            energy (``energy_j`` None, the reason in ``unknown``), never 0.
        powercap_root: RAPL's powercap folder (empty: $GT_POWERCAP_ROOT or /sys/class/powercap).
        lock_dir: folder of the one-reader-per-device locks (empty: $GT_ENERGY_LOCK_DIR or
            /tmp/greentrain-energy-locks).
        timeline_points: power-timeline points kept per sensor (``power_timeline()``; 36000 is
            one hour at 100 ms), a whole number >= 0; 0: no timeline.
        sync: called before each window boundary, e.g. ``torch.cuda.synchronize`` so that queued
            GPU work is inside the window it belongs to (as Zeus's ``sync_execution_with``).

    Raises:
        ValueError: an argument out of its range or beside one it conflicts with (the message
            names it): ``interval_ms``, ``carbon`` (a negative, NaN or infinite number),
            ``cpu_tdp_w``, ``pid``, ``timeline_points``, ``country``, the carbon reading options.
        TypeError: ``interval_ms`` that is not a number, or ``carbon`` that is none of a
            number, a string, a path or None (a bool is neither a number nor a period here);
            the message names the argument and what it takes.
        greentrain.Error: a bad option found when the sensors or files are read (the message
            names it), e.g. a GPU position that is not visible or a carbon CSV with a bad line.
    """

    def __init__(self, gpus: Optional[Sequence[int]] = None, cpu: bool = True,
                 interval_ms: float = 100, carbon: Union[None, float, str, os.PathLike] = None,
                 *, carbon_utc_offset_h: float = 0.0, region: str = "",
                 cpu_tdp_w: Optional[float] = None, pid: int = 0, powercap_root: str = "",
                 lock_dir: str = "", sync: Optional[Callable[[], Any]] = None,
                 strict: bool = True, timeline_points: int = 36000, carbon_format: str = "",
                 carbon_column: str = "", carbon_time_column: str = "", carbon_unit: str = "",
                 carbon_value: str = "", country: str = "") -> None:
        if isinstance(interval_ms, bool) or not isinstance(interval_ms, numbers.Real):
            raise TypeError(f"interval_ms={interval_ms!r}: expected a number of ms, 0 (no "
                            "sampling thread) or a period in [1, 3600000]")
        if not (interval_ms == 0 or 1 <= interval_ms <= 3.6e6):  # NaN fails both
            raise ValueError(f"interval_ms {interval_ms}: expected 0 (no sampling thread) or a "
                             "period in [1, 3600000] ms")
        if isinstance(timeline_points, bool) or not isinstance(timeline_points, numbers.Integral) \
                or not 0 <= timeline_points < 2**63:
            raise ValueError(f"timeline_points={timeline_points!r}: expected a whole number of "
                             "points per sensor >= 0 (0: no timeline)")
        if cpu_tdp_w is not None and (isinstance(cpu_tdp_w, bool)
                                      or not isinstance(cpu_tdp_w, numbers.Real)):
            raise ValueError(f"cpu_tdp_w={cpu_tdp_w!r}: expected None or 0 (the CPU model's "
                             "table) or a TDP per socket in [1, 2000] W")
        if isinstance(pid, bool) or not isinstance(pid, numbers.Integral) or \
                not -2**31 <= pid < 2**31:  # a pid is a C int
            raise ValueError(f"pid={pid!r}: expected the id of a running process, or 0 for the "
                             "whole machine")
        carbon_g, carbon_country, carbon_csv = _carbon_source(carbon)
        if carbon_g is not None:
            region = region or "given"
        self._sync = sync
        # the carbon_* reading options without carbon=PATH raise ValueError there (the check
        # the command line and the train configuration use, CarbonReadOptions)
        self._core = _core.make_meter(dict(
            gpus=None if gpus is None else [int(g) for g in gpus], gpus_strict=bool(strict),
            cpu=bool(cpu), interval_s=interval_ms / 1000.0, carbon_g_per_kwh=carbon_g,
            carbon_csv=carbon_csv or None, carbon_utc_offset_h=float(carbon_utc_offset_h),
            # 0 is the table, as energy.cpu_tdp_w = 0 in a training configuration
            carbon_region=region, cpu_tdp_w=None if not cpu_tdp_w else float(cpu_tdp_w),
            pid=int(pid),
            powercap_root=powercap_root, lock_dir=lock_dir, timeline_points=int(timeline_points),
            carbon_country=carbon_country or None, country=country or None,
            carbon_format=carbon_format, carbon_column=carbon_column,
            carbon_time_column=carbon_time_column, carbon_unit=carbon_unit,
            carbon_value=carbon_value))
        _warn_implausible_carbon(carbon, carbon_g, self._core.carbon_warnings())
        self._lock = threading.Lock()
        self._seq = itertools.count(1)
        self.last: Dict[str, Measurement] = {}
        """The last measurement of each window name made by ``window()`` or ``measure()``."""
        self._users: "weakref.WeakSet[Any]" = weakref.WeakSet()

    # -- windows -----------------------------------------------------------------------------
    def begin_window(self, name: str) -> None:
        """Starts window ``name`` now. Raises greentrain.Error if one of that name is open."""
        if self._sync is not None:
            self._sync()
        self._meter().begin_window(name)

    def end_window(self, name: str) -> Measurement:
        """Ends window ``name`` and returns its Measurement. Raises greentrain.Error if no
        window of that name is open."""
        if self._sync is not None:
            self._sync()
        return Measurement._from_core(self._meter().end_window(name))

    @property
    def reading_source(self) -> str:
        """Where the readings come from: ``"direct"`` (this process reads the sensors), or the
        node daemon, e.g. ``"greentrain serve (pid 12) at /run/greentrain/serve.sock"``: when
        ``greentrain serve`` runs (socket at $GT_DAEMON_SOCKET or the default path), every
        Meter of every process reads through it, and none is left without figures."""
        return self._meter().reading_source()

    def has_window(self, name: str) -> bool:
        """True while a window of this name is open."""
        return self._meter().has_window(name)

    @contextmanager
    def window(self, name: str) -> Iterator[Window]:
        """``with meter.window("eval") as w: ...`` then ``w.measurement``. The window also ends
        (and is recorded in ``meter.last``) when the block raises."""
        w = Window(name)
        key = self._free_name(name)
        self.begin_window(key)
        try:
            yield w
        finally:
            m = self.end_window(key)
            w.measurement = m
            self.last[name] = m

    def measure(self, name: Optional[str] = None) -> Callable[[F], F]:
        """Decorator: each call of the function is a window named ``name`` (default: the
        function's qualified name); its Measurement goes to ``meter.last[name]`` and to the
        wrapper's ``last_measurement``. Recursive or concurrent calls get windows of their
        own."""

        def deco(fn: F) -> F:
            label = name or getattr(fn, "__qualname__", "function")

            def run(*args: Any, **kwargs: Any) -> Any:
                w_holder: List[Window] = []
                try:
                    with self.window(label) as w:
                        w_holder.append(w)
                        return fn(*args, **kwargs)
                finally:
                    if w_holder and w_holder[0].measurement is not None:
                        run.last_measurement = w_holder[0].measurement  # type: ignore[attr-defined]

            functools.update_wrapper(run, fn)
            run.last_measurement = None  # type: ignore[attr-defined]
            return run  # type: ignore[return-value]

        return deco

    def _free_name(self, name: str) -> str:
        if not self._meter().has_window(name):
            return name
        return f"{name}#{next(self._seq)}"

    # -- about the meter ---------------------------------------------------------------------
    def sensors(self) -> List[SensorInfo]:
        """The sensors of this meter: available or not, counted or not, and the ones another
        process reads (one reader per device per node; then ``reason`` names it)."""
        return [SensorInfo.from_dict(d) for d in self._meter().sensors()]

    @property
    def estimated(self) -> bool:
        """True when any counted figure is an estimate (no hardware counter covers a domain)."""
        return self._meter().estimated()

    @property
    def sampler_overhead(self) -> float:
        """CPU time of the sampling thread over its wall time (fraction of one core)."""
        return self._meter().sampler_overhead()

    @property
    def interval_ms(self) -> float:
        """The sampling period (ms)."""
        return self._meter().interval_s() * 1000.0

    @property
    def carbon_source(self) -> str:
        """The carbon intensity in use, in words."""
        return self._meter().carbon_source()

    @property
    def country(self) -> Tuple[str, str]:
        """(ISO alpha-3 code, name) of the country the carbon figures are for; empty strings
        when none was named."""
        code, name = self._meter().carbon_country()
        return code, name

    @property
    def flags(self) -> List[str]:
        """What this meter puts into every measurement, e.g. GPUs asked for that cannot be read
        (``strict=False``)."""
        return list(self._meter().meter_flags())

    # -- power now and over time (Zeus's PowerMonitor) ---------------------------------------
    def _sensor_keys(self, domain: Optional[str]) -> Dict[str, Any]:
        """sensor name -> key: the device index for one domain kind, else "domain:index".
        Raises ValueError for a domain that is not one of _DOMAINS (or None)."""
        if domain is not None and domain not in _DOMAINS:
            raise ValueError(f"domain {domain!r} is not known; expected one of "
                             + ", ".join(repr(d) for d in _DOMAINS)
                             + " or None (every counted sensor)")
        out: Dict[str, Any] = {}
        for s in self.sensors():
            if not (s.available and s.counted) or (domain is not None and s.domain != domain):
                continue
            out[s.name] = s.index if domain is not None else f"{s.domain}:{s.index}"
        return out

    def power_w(self, domain: Optional[str] = "gpu") -> Dict[Any, float]:
        """Power now (W) per device, as of the last sample: ``{gpu_index: W}`` for
        ``domain="gpu"`` (as Zeus's ``PowerMonitor.get_power()``), ``"cpu"`` (by package),
        ``"ram"``; ``domain=None``: every counted sensor, keyed ``"gpu:0"``, ``"cpu:0"``, ...
        Each value is the average over the newest span at least as long as the sensor's
        refresh period; a device with no such span yet is absent. Another ``domain`` (not
        ``"gpu"``, ``"cpu"``, ``"ram"``, ``"psys"`` or None) raises ValueError naming them."""
        keys = self._sensor_keys(domain)
        now = self._meter().power_now()
        return {keys[n]: p[2] for n, p in now.items() if n in keys}

    def power_timeline(self, start_unix_s: Optional[float] = None,
                       end_unix_s: Optional[float] = None, domain: Optional[str] = "gpu"
                       ) -> Dict[Any, List[Tuple[float, float]]]:
        """Power over time per device: ``{gpu_index: [(unix_s, W), ...]}`` (keys as in
        ``power_w``), oldest first, the points whose span ends in (start, end] (None: no
        bound). Each point is a span's average power shown at its end time; spans are at least
        the sensor's refresh period (NVML's counter: 100 ms) and follow the sampling interval.
        Keeps the newest ``timeline_points`` per sensor. Zeus's
        ``PowerMonitor.get_power_timeline()``."""
        t0 = float("-inf") if start_unix_s is None else float(start_unix_s)
        t1 = float("inf") if end_unix_s is None else float(end_unix_s)
        m = self._meter()
        return {key: [(p[1], p[2]) for p in m.power_timeline(name, t0, t1)]
                for name, key in self._sensor_keys(domain).items()}

    def window_timeline(self, measurement: Measurement, domain: Optional[str] = "gpu"
                        ) -> Dict[Any, List[Tuple[float, float]]]:
        """``power_timeline`` over a measured window (its start to its end)."""
        start = measurement.start_unix_s
        return self.power_timeline(start, start + measurement.duration_s, domain)

    def sample_now(self) -> None:
        """Reads every sensor now (the thread does it every interval_ms)."""
        self._meter().sample_now()

    # -- lifetime ----------------------------------------------------------------------------
    def _meter(self) -> Any:
        m = self._core
        if m is None:
            raise _core.Error("this Meter is closed")
        return m

    def _attach(self, user: Any) -> None:
        self._users.add(user)

    def close(self) -> None:
        """Closes the power-limit optimizers that use this meter (restoring their limits), stops
        the sampling thread and releases the device locks. Idempotent."""
        for u in list(self._users):
            u.close()
        self._core = None

    def __enter__(self) -> "Meter":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
