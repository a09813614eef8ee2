"""The package `pip install .` put in the venv: run with `python -I` from outside the
repository (no PYTHONPATH, no stand-ins), it must import and list this machine's sensors,
GPU or not, RAPL or not, and measure a window."""

import greentrain

assert "site-packages" in greentrain.__file__, greentrain.__file__
names = [s.name for s in greentrain.sensors()]
assert names, "no sensor listed"
with greentrain.Meter(interval_ms=0) as meter:
    with meter.window("check") as w:
        sum(range(100000))
m = w.measurement
assert m.duration_s > 0
assert (m.energy_j is None) == ("energy_j" in m.unknown)
print("installed greentrain:", greentrain.__file__, "sensors:", names, "energy_j:", m.energy_j)
