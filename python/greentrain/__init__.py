"""greentrain: energy measurement and power-limit tuning for training loops.

Bindings of greentrain's C++ energy meter and power-limit search (nothing is implemented twice):

- ``Meter``: named windows (begin_window/end_window, ``with meter.window(...)``,
  ``@meter.measure()``) in seconds, joules per domain and in all, average and peak watts and
  gCO2e, each figure saying how it was made (counter, integrated samples, estimate).
- ``sensors()``: what ``greentrain sensors`` lists.
- ``PowerLimitOptimizer``: ``greentrain tune``'s search, driven from a Python loop.
- ``greentrain.integrations``: a PyTorch loop helper and a Hugging Face TrainerCallback.

Units: s, J, W, gCO2e (grid intensity in gCO2e/kWh). Unknown figures are None, with the reason
in ``Measurement.unknown``.
"""

from ._core import Error
from .measurement import DomainMeasurement, Measurement, SensorInfo, codecarbon_columns
from .meter import Meter, Window, sensors
from .optimizer import PowerLimitOptimizer, power_limit_devices

__version__ = "0.1.0"

__all__ = ["DomainMeasurement", "Error", "Measurement", "Meter", "PowerLimitOptimizer",
           "SensorInfo", "Window", "codecarbon_columns", "power_limit_devices", "sensors"]
