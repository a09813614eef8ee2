#!/usr/bin/env python3
"""bench/e2t_report_runs.py OUT NAME...: the run folders of bench/energy_to_target.sh's report,
with every run's energy from the one meter that measured them all.

Each NAME is a run of OUT: a greentrain run folder OUT/NAME or the PyTorch script's folder
OUT/NAME.run, and the measurement OUT/NAME.measure.json of `greentrain measure` around it.
Writes OUT/report-runs/NAME (metrics.jsonl, config.toml, summary.json) where
 - summary.json's energy, gCO2e and joules per token, and its target record's joules, gCO2e
   and seconds, are the measurement's: the whole command, from its start to its exit at the
   target (a greentrain run's own figures are its meter's, of another scope, and are dropped);
 - metrics.jsonl's energy lines are replaced, for every run alike, by one line of energy per
   validation: the measurement's joules shared out in proportion to the step time of the
   interval (so loss against joules can be drawn for PyTorch too), marked with
   energy_basis.
Nothing in OUT/NAME is changed. Prints the folders written.
"""
import json
import os
import shutil
import sys

ENERGY_KEYS = {"energy_interval_tokens", "energy_j", "g_co2e", "power_w", "power_w_by_domain",
               "joules_per_token", "energy_estimated", "power_estimated_domains",
               "carbon_g_per_kwh", "carbon_origin", "carbon_source", "gpu_energy_j",
               "gpu_joules_per_token"}


def read_jsonl(path):
    lines = []
    with open(path) as f:
        for raw in f:
            raw = raw.strip()
            if raw:
                try:
                    lines.append(json.loads(raw))
                except json.JSONDecodeError:
                    pass  # a cut-short last line: the report says what it could read
    return lines


def write_atomic(path, text):
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.replace(path + ".tmp", path)


def build(out, name):
    src = os.path.join(out, name)
    if not os.path.isdir(src):
        src = os.path.join(out, name + ".run")
    m = json.load(open(os.path.join(out, name + ".measure.json")))
    dst = os.path.join(out, "report-runs", name)
    os.makedirs(dst, exist_ok=True)
    shutil.copyfile(os.path.join(src, "config.toml"), os.path.join(dst, "config.toml"))
    s = json.load(open(os.path.join(src, "summary.json")))
    lines = read_jsonl(os.path.join(src, "metrics.jsonl"))
    energy, grams = m.get("energy_j"), m.get("g_co2e")
    est = bool(m.get("estimated", False))
    ci = m.get("carbon_g_per_kwh")
    by_domain = {d["domain"]: d.get("avg_power_w") for d in m.get("domains", [])}
    basis = ("greentrain measure around the whole command (one meter for every run), shared "
             "out over the validation intervals by step time")
    step_s = sum(l.get("step_time_s", 0) for l in lines) or None
    for l in lines:
        for k in ENERGY_KEYS:
            l.pop(k, None)
    tokens_since, seconds_since = 0, 0.0
    for i, l in enumerate(lines):
        if l.get("step_time_s") and l.get("tokens_per_s"):
            tokens_since += round(l["tokens_per_s"] * l["step_time_s"])
            seconds_since += l["step_time_s"]
        if "val_loss" in l or i == len(lines) - 1:
            e = energy * seconds_since / step_s if energy is not None and step_s else None
            l.update(energy_interval_tokens=tokens_since, energy_j=e, energy_estimated=est,
                     energy_basis=basis,
                     g_co2e=e * ci / 3.6e6 if e is not None and ci is not None else None,
                     joules_per_token=e / tokens_since if e is not None and tokens_since else None,
                     power_w_by_domain=by_domain, carbon_g_per_kwh=ci)
            tokens_since, seconds_since = 0, 0.0
    write_atomic(os.path.join(dst, "metrics.jsonl"), "".join(json.dumps(l) + "\n" for l in lines))
    s.pop("energy", None)
    s.update(energy_j=energy, g_co2e=grams, energy_estimated=est, energy_unknown=energy is None,
             energy_method=f"greentrain measure (the whole command): {m.get('method', '')}",
             joules_per_token=energy / s["tokens"] if energy is not None and s.get("tokens")
             else None)
    if energy is None:
        s["energy_unknown_reason"] = "greentrain measure could not measure this command"
    t = s.get("target")
    if isinstance(t, dict) and t.get("reached"):
        t.update(energy_j=energy, g_co2e=grams, seconds=m.get("duration_s"),
                 energy_estimated=est,
                 seconds_basis="wall time of the whole command, to its exit at the target")
    write_atomic(os.path.join(dst, "summary.json"), json.dumps(s, indent=1) + "\n")
    return dst


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__.split("\n")[0])
    out = sys.argv[1]
    for name in sys.argv[2:]:
        try:
            print(build(out, name))
        except (OSError, KeyError, ValueError) as e:
            print(f"{name}: left out of the report: {e}", file=sys.stderr)


if __name__ == "__main__":
    main()
