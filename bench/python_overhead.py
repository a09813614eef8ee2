#!/usr/bin/env python3
"""bench/python_overhead.py: what an energy window costs a Python training loop, for greentrain,
Zeus (ZeusMonitor) and CodeCarbon (EmissionsTracker), side by side on this machine:

  1. window overhead: microseconds per begin/end pair (per-round median of N pairs; median over
     R rounds; the tools alternate within each round, each in a process of its own);
  2. sampler CPU share: the process's CPU time over wall time while the tool is set up and the
     loop sleeps, minus the same for a process without the tool (fraction of one core);
  3. what each reports here for the same work (1 s of a busy CPU loop), messages included;
  4. greentrain's Python Meter against the CLI's `greentrain measure` on the same command
     (joules and joules per second; needs the program: --program).

Run in the bench venv (bench/setup-python-bench.sh) with the module built into build/python:
  PYTHONPATH=build/python build/bench-venv/bin/python bench/python_overhead.py \\
      --program build/src/cli/greentrain [--fake-nvml build/tests/energy/libfake_nvml.so]
With --fake-nvml every greentrain figure is also taken with the stand-in NVML (one GPU at a
constant 150 W), whose energy is known.
"""

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))

# --- the child: one tool, one task ---------------------------------------------------------

WORK_S = 1.0


def busy(seconds):
    t = time.perf_counter() + seconds
    x = 0
    while time.perf_counter() < t:
        x += 1
    return x


def make_tool(tool):
    """(begin(name), end(name) -> result, report(result) -> dict, close()) for a tool, each its
    own API: the overhead loop calls begin and end alone. Raises if the tool cannot run."""
    if tool.startswith("greentrain"):
        import greentrain
        # greentrain: this machine's sensors; -gpu: the stand-in GPU alone; -nothing: no sensor
        # (what Zeus reads on a machine without a GPU or RAPL)
        meter = greentrain.Meter(gpus=[] if tool == "greentrain-nothing" else None,
                                 cpu=(tool == "greentrain"), interval_ms=100)

        def report(m):
            return {"energy_j": m.energy_j, "by_domain": m.energy_j_by_domain,
                    "avg_power_w": m.avg_power_w, "g_co2e": m.g_co2e, "estimated": m.estimated,
                    "unknown": m.unknown, "flags": m.flags[:3],
                    "sensors": [s.name for s in meter.sensors() if s.available and s.counted],
                    "sampler_overhead": meter.sampler_overhead}
        return meter.begin_window, meter.end_window, report, meter.close
    if tool == "zeus":
        from zeus.monitor import ZeusMonitor
        mon = ZeusMonitor(approx_instant_energy=True)

        def report(m):
            return {"time_s": m.time, "gpu_energy_j": dict(m.gpu_energy),
                    "cpu_energy_j": dict(m.cpu_energy or {}),
                    "dram_energy_j": dict(m.dram_energy or {}), "total_energy_j": m.total_energy}
        return mon.begin_window, mon.end_window, report, lambda: None
    if tool == "codecarbon":
        import logging
        from codecarbon import EmissionsTracker
        tr = EmissionsTracker(save_to_file=False, log_level="error", project_name="bench")
        logging.getLogger("codecarbon").setLevel(logging.ERROR)

        def report(d):
            return {"duration_s": d.duration, "energy_kwh": d.energy_consumed,
                    "energy_j": d.energy_consumed * 3.6e6, "cpu_power_w": d.cpu_power,
                    "ram_power_w": d.ram_power, "gpu_power_w": d.gpu_power,
                    "emissions_kg": d.emissions}

        def close():
            try:
                tr.stop()
            except Exception:
                pass
        return tr.start_task, tr.stop_task, report, close
    if tool == "none":
        return (lambda n: None), (lambda n: None), (lambda m: {}), (lambda: None)
    raise SystemExit(f"unknown tool {tool}")


def child(tool, task, n):
    out = {"tool": tool, "task": task}
    t_setup = time.perf_counter()
    c0 = time.process_time()
    try:
        begin, end, report, close = make_tool(tool)
    except Exception as e:  # what the tool says here
        out["error"] = f"{type(e).__name__}: {e}"
        print(json.dumps(out))
        return
    out["setup_s"] = time.perf_counter() - t_setup
    try:
        if task == "overhead":
            begin("warm"); end("warm")
            per = []
            for i in range(n):
                t0 = time.perf_counter_ns()
                begin("w")
                end("w")
                per.append((time.perf_counter_ns() - t0) / 1e3)
            out["us_per_pair"] = statistics.median(per)
        elif task == "cpu":
            begin("idle")
            c0, w0 = time.process_time(), time.perf_counter()
            time.sleep(n)
            out["cpu_share"] = (time.process_time() - c0) / (time.perf_counter() - w0)
            end("idle")
        elif task == "report":
            begin("work")
            busy(WORK_S)
            out["report"] = report(end("work"))
    except Exception as e:
        out["error"] = f"{type(e).__name__}: {e}"
    finally:
        close()
    print(json.dumps(out, default=str))


# --- the parent ----------------------------------------------------------------------------

def run_child(tool, task, n, env):
    p = subprocess.run([sys.executable, __file__, "--child", tool, task, str(n)],
                       capture_output=True, text=True, env=env, timeout=600)
    lines = [l for l in p.stdout.splitlines() if l.startswith("{")]
    if not lines:
        return {"tool": tool, "task": task,
                "error": f"exit {p.returncode}: {p.stderr.strip().splitlines()[-1:]}"}
    r = json.loads(lines[-1])
    r["stderr_tail"] = p.stderr.strip().splitlines()[-2:]
    return r


def cpu_model():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def compare_with_cli(program, env, label):
    """The same command measured by `greentrain measure` and by the Python Meter around it."""
    import greentrain
    cmd = [sys.executable, "-c", f"import time\nt=time.perf_counter()+{WORK_S}\n"
           "while time.perf_counter()<t: pass"]
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "m.json")
        subprocess.run([program, "measure", "--json", out, "--"] + cmd, env=env, check=True,
                       capture_output=True)
        cli = json.load(open(out))
    old = dict(os.environ)
    os.environ.clear(); os.environ.update(env)
    try:
        with greentrain.Meter() as meter:
            meter.begin_window("cmd")
            subprocess.run(cmd, check=True)
            py = meter.end_window("cmd")
    finally:
        os.environ.clear(); os.environ.update(old)
    def dom(j):
        out = {}
        for x in j["domains"]:
            out[x["domain"]] = out.get(x["domain"], 0) + x["energy_j"]
        return out
    print(f"\n[{label}] `greentrain measure` vs greentrain.Meter on the same {WORK_S:g} s command:")
    print(f"  {'':12s} {'s':>7s} {'J':>9s} {'J/s':>8s}  per domain (J)")
    for name, s, j, dd in (("CLI measure", cli["duration_s"], cli["energy_j"], dom(cli)),
                           ("Python Meter", py.duration_s, py.energy_j, py.energy_j_by_domain)):
        if name == "CLI measure" and not dd:
            j = None  # the CLI's JSON writes 0 when no sensor was counted; its flags say unknown
        jj = "unknown" if j is None else f"{j:9.3f}"
        jps = "" if j is None else f"{j / s:8.2f}"
        print(f"  {name:12s} {s:7.3f} {jj:>9s} {jps:>8s}  "
              + ", ".join(f"{k} {v:.3f}" for k, v in sorted(dd.items())))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    ap.add_argument("--pairs", type=int, default=2000, help="begin/end pairs per round")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--idle-s", type=float, default=3.0, help="seconds of the CPU-share test")
    ap.add_argument("--program", help="the greentrain program, for the CLI comparison")
    ap.add_argument("--fake-nvml", help="stand-in NVML library (tests/energy/fake_nvml.cpp)")
    ap.add_argument("--tools", default="greentrain,zeus,codecarbon")
    a = ap.parse_args()
    if a.child:
        child(a.child[0], a.child[1], int(float(a.child[2])))
        return

    # A lock folder of its own: on a shared machine another greentrain process may be the
    # reader of this machine's estimate (one reader per device), and then we would read nothing.
    base = dict(os.environ, GT_ENERGY_LOCK_DIR=tempfile.mkdtemp(prefix="gt_bench_locks_"))
    envs = {}
    for t in a.tools.split(","):
        envs[t] = base
    if "greentrain" in envs:
        envs["greentrain-nothing"] = base
    if a.fake_nvml:
        fake = dict(base, GT_NVML_LIBRARY=os.path.abspath(a.fake_nvml),
                    FAKE_NVML_POWER_MW="150000")
        envs["greentrain-gpu"] = fake  # the stand-in GPU alone: the cost of a counter read
    tools = list(envs)
    print(f"CPU: {cpu_model()} ({os.cpu_count()} logical CPUs); Python {platform.python_version()}")
    vers = {}
    for mod, dist in (("greentrain", "greentrain"), ("zeus", "zeus"), ("codecarbon", "codecarbon")):
        try:
            m = __import__(mod)
            vers[mod] = getattr(m, "__version__", "?")
        except Exception as e:
            vers[mod] = f"not importable ({type(e).__name__}: {e})"
    print("versions:", ", ".join(f"{k} {v}" for k, v in vers.items()))

    # 1. overhead, tools alternating within each round
    per_tool = {t: [] for t in tools}
    errors = {}
    for r in range(a.rounds):
        for t in tools:
            res = run_child(t, "overhead", a.pairs if t != "codecarbon" else max(20, a.pairs // 50),
                            envs[t])
            if "us_per_pair" in res:
                per_tool[t].append(res["us_per_pair"])
            else:
                errors[t] = res.get("error")
    # 2. sampler CPU share, against a process without any tool
    baseline = statistics.median(run_child("none", "cpu", a.idle_s, base)["cpu_share"]
                                 for _ in range(3))
    shares = {}
    for t in tools:
        res = run_child(t, "cpu", a.idle_s, envs[t])
        shares[t] = res.get("cpu_share")
        if "error" in res:
            errors.setdefault(t, res["error"])
    print(f"\n1-2. window overhead (median of {a.rounds} rounds; each round the median of "
          f"{a.pairs} begin/end pairs, CodeCarbon {max(20, a.pairs // 50)}) and sampler CPU "
          f"share over {a.idle_s:g} s idle (process CPU / wall, minus {baseline:.4f} without a "
          f"tool):")
    print(f"  {'tool':16s} {'us/pair':>10s} {'rounds':>30s} {'CPU share':>10s}")
    for t in tools:
        v = per_tool[t]
        us = f"{statistics.median(v):10.1f}" if v else f"{'-':>10s}"
        rs = " ".join(f"{x:.0f}" for x in v)
        sh = "-" if shares[t] is None else f"{max(0.0, shares[t] - baseline):.4f}"
        print(f"  {t:16s} {us} {rs:>30s} {sh:>10s}")
    if per_tool.get("greentrain") and per_tool.get("zeus"):
        print(f"  greentrain / zeus window cost: "
              f"{statistics.median(per_tool['greentrain']) / statistics.median(per_tool['zeus']):.3f}")
    for t, e in errors.items():
        print(f"  {t}: {e}")

    # 3. what each reports for the same work
    print(f"\n3. what each reports for {WORK_S:g} s of a busy CPU loop:")
    for t in tools:
        res = run_child(t, "report", 0, envs[t])
        print(f"  {t}: " + json.dumps(res.get("report", res.get("error")), default=str)[:900])
        tail = [l for l in res.get("stderr_tail", []) if l.strip()]
        if tail:
            print(f"    stderr: {' | '.join(tail)[:400]}")

    # 4. the CLI
    if a.program:
        compare_with_cli(a.program, base, "this machine's sensors")
        if a.fake_nvml:
            compare_with_cli(a.program, envs["greentrain-gpu"], "stand-in GPU at 150 W")


if __name__ == "__main__":
    main()
