#!/usr/bin/env python3
"""The reporting half of bench/gpu-check.sh: each subcommand reads what one stage produced and
writes that stage's results as WORK/NN-name.json and WORK/NN-name.txt (a plain-text table) in
the check's work folder, each through a temporary name and a rename; `publish` then rewrites
the only two files of the output folder: OUT/results.json (every stage so far, with the tails
of its logs) and OUT/logs.tgz (the stages' tables and every log). Also writes the token shards
the stages train on and unpacks .deb files where dpkg is missing. Standard library only: GPU
nodes often have Python without numpy.

Every stage document has "stage", "name", "status" (ok: it ran and its figures are recorded;
failed: a command failed, "reason" says which; skipped: it could not run, "reason" says why),
"seconds" and "rehearsal" (true when bench/gpu-check.sh --rehearse ran it on the CPU with tiny
shapes: its figures say nothing about a GPU). A figure that could not be measured is null with
a reason, never 0.
"""
import argparse
import io
import json
import lzma
import os
import random
import re
import statistics
import struct
import subprocess
import sys
import tarfile
import xml.etree.ElementTree as ET

# Dense (no 2:4 sparsity) tensor-core peaks, TFLOP/s, bf16 and fp8 (E4M3/E5M2), from NVIDIA's
# datasheets, which give the sparse figure: dense is half of it. Matched against nvidia-smi's
# name in order (GH200 before H200, NVL and PCIe before the SXM default). fp8 is None where
# the GPU has no fp8 tensor cores (A100).
DATASHEET = [
    ("GH200", 989.0, 1979.0, "NVIDIA GH200 Grace Hopper Superchip datasheet: BF16 Tensor Core "
     "1,979 and FP8 Tensor Core 3,958 TFLOPS with sparsity (989 and 1,979 dense)"),
    ("H200 NVL", 835.0, 1671.0, "NVIDIA H200 Tensor Core GPU datasheet, H200 NVL: BF16 Tensor "
     "Core 1,671 and FP8 Tensor Core 3,341 TFLOPS with sparsity (835 and 1,671 dense)"),
    ("H200", 989.0, 1979.0, "NVIDIA H200 Tensor Core GPU datasheet, H200 SXM: BF16 Tensor Core "
     "1,979 and FP8 Tensor Core 3,958 TFLOPS with sparsity (989 and 1,979 dense)"),
    ("H100 NVL", 835.0, 1671.0, "NVIDIA H100 Tensor Core GPU datasheet, H100 NVL: BF16 Tensor "
     "Core 1,671 and FP8 Tensor Core 3,341 TFLOPS with sparsity (835 and 1,671 dense)"),
    ("H100 PCIE", 756.0, 1513.0, "NVIDIA H100 Tensor Core GPU datasheet, H100 PCIe: BF16 "
     "Tensor Core 1,513 and FP8 Tensor Core 3,026 TFLOPS with sparsity (756 and 1,513 dense)"),
    ("H100", 989.0, 1979.0, "NVIDIA H100 Tensor Core GPU datasheet, H100 SXM: BF16 Tensor Core "
     "1,979 and FP8 Tensor Core 3,958 TFLOPS with sparsity (989 and 1,979 dense)"),
    ("A100", 312.0, None, "NVIDIA A100 Tensor Core GPU datasheet (40GB and 80GB, SXM and PCIe): "
     "BF16 Tensor Core 312 TFLOPS (624 with sparsity); no FP8 tensor cores"),
]

STAGES = {
    0: "gpu-state", 1: "build", 2: "op-test", 3: "losses", 4: "gpt2-124m", 5: "matmul-peak",
    6: "fp8-vs-bf16", 7: "ablate", 8: "kernel-bench", 9: "sanitizer",
}


def datasheet_peak(gpu_name, precision="bf16"):
    """(TFLOP/s, source) of the GPU's dense `precision` ("bf16" or "fp8") peak, or (None,
    reason)."""
    up = (gpu_name or "").upper().replace("-", " ")
    for key, bf16, fp8, source in DATASHEET:
        if all(word in up for word in key.split()):
            tflops = fp8 if precision == "fp8" else bf16
            return (tflops, source) if tflops else (None, f"'{gpu_name}': {source}")
    return None, f"no datasheet figure for '{gpu_name}' in bench/gpu_check.py's table"


# ---- writing -------------------------------------------------------------------------------

def write_atomic(path, text):
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def fmt(v, spec="{:.4g}", unknown="unknown"):
    return unknown if v is None else spec.format(v)


def table(header, rows):
    """Plain-text table: columns padded to their widest cell."""
    cells = [[str(c) for c in header]] + [[str(c) for c in r] for r in rows]
    width = [max(len(r[i]) for r in cells) for i in range(len(header))]
    line = lambda r: "  ".join(c.ljust(w) for c, w in zip(r, width)).rstrip()  # noqa: E731
    return "\n".join([line(cells[0]), line(["-" * w for w in width])] + [line(r) for r in cells[1:]])


def stage_path(out, num, ext):
    return os.path.join(out, f"{num:02d}-{STAGES[num]}.{ext}")


def write_stage(args, doc, text):
    doc = {"stage": args.stage, "name": STAGES[args.stage], **doc}
    doc.setdefault("seconds", args.seconds)
    doc["rehearsal"] = bool(getattr(args, "rehearse", False))
    head = f"stage {args.stage} ({STAGES[args.stage]}): {doc['status']}"
    if doc.get("reason"):
        head += f": {doc['reason']}"
    if doc["rehearsal"]:
        head += "\n(rehearsal on the CPU with tiny shapes: these figures say nothing about a GPU)"
    write_atomic(stage_path(args.out, args.stage, "json"), json.dumps(doc, indent=2) + "\n")
    write_atomic(stage_path(args.out, args.stage, "txt"), head + ("\n\n" + text if text else "") + "\n")
    summarize(args.out)
    print(head)
    if text:
        print(text)


def summarize(out):
    """OUT/summary.{json,txt}: one line per stage written so far."""
    docs = []
    for num in sorted(STAGES):
        p = stage_path(out, num, "json")
        if os.path.exists(p):
            with open(p) as f:
                docs.append(json.load(f))
    rows = [[d["stage"], d["name"], d["status"], fmt(d.get("seconds"), "{:.0f}", "-"),
             (d.get("headline") if d["status"] == "ok" else d.get("reason")) or ""] for d in docs]
    write_atomic(os.path.join(out, "summary.json"), json.dumps(docs, indent=2) + "\n")
    write_atomic(os.path.join(out, "summary.txt"),
                 table(["stage", "name", "status", "s", "result"], rows) + "\n")


def load_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def tail(path, n=15):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-n:])
    except OSError:
        return ""


# ---- subcommands ---------------------------------------------------------------------------

def cmd_shard(args):
    """An llm.c token shard (train/data.h: 256 int32 header, magic 20240520, version 1, count;
    uint16 tokens). Tokens follow a seeded Markov chain: the next token is a fixed random
    permutation of the current one with probability 0.75, else uniform, so a model can learn
    it (the loss falls from ln V) while every token of the vocabulary occurs."""
    if not 2 <= args.vocab <= 65536:
        sys.exit(f"gpu_check.py shard: --vocab {args.vocab}: expected 2 to 65536 (uint16 tokens)")
    rng = random.Random(args.seed)
    perm = list(range(args.vocab))
    rng.shuffle(perm)
    from array import array
    toks = array("H", bytes(2 * args.tokens))
    cur = 0
    rnd, V = rng.random, args.vocab
    for i in range(args.tokens):
        cur = perm[cur] if rnd() < 0.75 else int(rnd() * V)
        toks[i] = cur
    if sys.byteorder != "little":
        toks.byteswap()
    header = struct.pack("<256i", 20240520, 1, args.tokens, *([0] * 253))
    tmp = f"{args.path}.tmp{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(header)
        f.write(toks.tobytes())
    os.replace(tmp, args.path)


GPU_FIELDS = [
    "index", "name", "uuid", "pci.bus_id", "driver_version", "compute_cap", "memory.total",
    "memory.used", "power.limit", "power.default_limit", "power.min_limit", "power.max_limit",
    "enforced.power.limit", "power.draw", "clocks.sm", "clocks.mem", "clocks.max.sm",
    "clocks.max.mem", "clocks.applications.graphics", "clocks.applications.memory",
    "temperature.gpu", "pstate", "persistence_mode", "mig.mode.current", "utilization.gpu",
    "compute_mode",
]


def smi_query(gpu, fields):
    r = subprocess.run(["nvidia-smi", "-i", gpu, f"--query-gpu={','.join(fields)}",
                        "--format=csv,noheader,nounits"], capture_output=True, text=True)
    if r.returncode != 0:
        return None
    vals = [v.strip() for v in r.stdout.strip().splitlines()[0].split(",")]
    return vals if len(vals) == len(fields) else None


def cmd_gpu_state(args):
    """Stage 0: read-only state of the GPU (nvidia-smi queries; nothing is changed)."""
    vals = smi_query(args.gpu, GPU_FIELDS)
    info, unsupported = {}, []
    if vals is None:  # an older driver refuses the whole query for one unknown field
        for f in GPU_FIELDS:
            v = smi_query(args.gpu, [f])
            if v is None:
                unsupported.append(f)
            info[f] = v[0] if v else None
    else:
        info = dict(zip(GPU_FIELDS, vals))
    for k, v in info.items():
        if v is not None and (v.startswith("[") or v in ("N/A", "")):
            info[k] = None  # [N/A], [Not Supported]
    cuda_driver = None
    try:
        with open(args.smi_q, errors="replace") as f:
            m = re.search(r"CUDA Version\s*:\s*(\S+)", f.read())
            cuda_driver = m.group(1) if m else None
    except OSError:
        pass
    peak, source = datasheet_peak(info.get("name"))
    # other processes on the GPU (they would share its time and its energy counter)
    r = subprocess.run(["nvidia-smi", "-i", args.gpu, "--query-compute-apps=pid,process_name,used_memory",
                        "--format=csv,noheader,nounits"], capture_output=True, text=True)
    apps = ([line.strip() for line in r.stdout.splitlines() if line.strip()]
            if r.returncode == 0 else None)
    doc = {"status": "ok", "gpu": info, "unsupported_fields": unsupported,
           "compute_processes": apps,
           "cuda_version_of_driver": cuda_driver, "nvcc": args.nvcc or None,
           "cpu": args.cpu, "cores": args.cores, "cuda_visible_devices": args.visible or None,
           "datasheet_bf16_tflops": peak, "datasheet_source": source,
           "nvidia_smi_q": os.path.basename(args.smi_q),
           "headline": f"{info.get('name')}, cc {info.get('compute_cap')}, driver "
                       f"{info.get('driver_version')}, power limit {info.get('power.limit')} W, "
                       f"SM clock {info.get('clocks.sm')}/{info.get('clocks.max.sm')} MHz"}
    rows = [[k, "unknown" if v is None else v] for k, v in info.items()]
    rows += [["CUDA (driver)", cuda_driver or "unknown"], ["nvcc", args.nvcc or "not found"],
             ["CPU", f"{args.cpu} ({args.cores} cores)"],
             ["other compute processes", "unknown" if apps is None else (", ".join(apps) or "none")],
             ["datasheet bf16 dense", f"{fmt(peak, '{:.0f}')} TFLOP/s ({source})"]]
    write_stage(args, doc, table(["field", "value"], rows))


def cmd_skip(args):
    """A stage that could not run, with the reason."""
    status = "failed" if args.failed else "skipped"
    write_stage(args, {"status": status, "reason": args.reason}, "")


def cmd_build(args):
    """Stage 1: the CMake configuration and build (bash passes what it did)."""
    ok = args.rc == 0
    doc = {"status": "ok" if ok else "failed", "cmake": args.cmake_line,
           "targets": args.targets, "jobs": args.jobs, "configure_s": args.configure_s,
           "build_s": args.build_s, "onednn": args.onednn, "cuda_arch": args.arch,
           "deps_prefix": args.deps_prefix or None, "log": os.path.basename(args.log),
           "headline": f"GT_ONEDNN={args.onednn}, CUDA arch {args.arch}, configure "
                       f"{fmt(args.configure_s, '{:.0f}')} s, build {fmt(args.build_s, '{:.0f}')} s"}
    if args.found:
        doc["packages_found"] = dict(kv.split("=", 1) for kv in args.found)
    if not ok:
        doc["reason"] = args.reason or f"exit status {args.rc}; see {os.path.basename(args.log)}"
        doc["log_tail"] = tail(args.log, 25)
    rows = [["GT_ONEDNN", args.onednn], ["CUDA architecture", args.arch],
            ["deps prefix", args.deps_prefix or "(system packages)"],
            ["configure", f"{fmt(args.configure_s, '{:.1f}')} s"],
            ["build", f"{fmt(args.build_s, '{:.1f}')} s, -j{args.jobs}, {' '.join(args.targets)}"]]
    rows += [[k, v] for k, v in doc.get("packages_found", {}).items()]
    text = table(["item", "value"], rows) + "\ncmake " + args.cmake_line
    if not ok:
        text += "\n\nlast lines of the log:\n" + doc["log_tail"]
    write_stage(args, doc, text)


def cmd_optest(args):
    """Stage 2: backend_ops_test's GoogleTest XML."""
    cases, failures = [], []
    try:
        root = ET.parse(args.xml).getroot()
        for tc in root.iter("testcase"):
            name = f"{tc.get('classname')}.{tc.get('name')}"
            fails = [f.get("message") or (f.text or "") for f in tc.findall("failure")]
            skipped = tc.find("skipped") is not None or tc.get("result") == "skipped"
            state = "failed" if fails else ("skipped" if skipped else "passed")
            cases.append({"name": name, "result": state, "seconds": float(tc.get("time", 0))})
            if fails:
                failures.append({"name": name, "message": fails[0][:2000]})
    except (OSError, ET.ParseError) as e:
        doc = {"status": "failed", "reason": f"no readable XML ({e}); exit status {args.rc}",
               "log_tail": tail(args.log, 25)}
        return write_stage(args, doc, doc["log_tail"])
    n_fail = sum(c["result"] == "failed" for c in cases)
    n_pass = sum(c["result"] == "passed" for c in cases)
    doc = {"status": "ok" if args.rc == 0 and cases else "failed", "filter": args.filter,
           "tests": len(cases), "passed": n_pass, "failed": n_fail,
           "skipped": len(cases) - n_pass - n_fail, "cases": cases, "failures": failures,
           "xml": os.path.basename(args.xml), "exit_status": args.rc,
           "headline": f"{n_pass}/{len(cases)} passed, {n_fail} failed"}
    if not cases:
        doc["reason"] = (f"no test matched --gtest_filter={args.filter} (is the backend "
                         "registered in src/backend/registry.cpp?)")
    elif args.rc != 0:
        doc["reason"] = f"{n_fail} failed (exit status {args.rc})"
    rows = [[c["name"], c["result"], f"{c['seconds']:.2f}"] for c in cases]
    text = table(["test", "result", "s"], rows)
    for f in failures:
        text += f"\n\nFAILED {f['name']}:\n{f['message'][:1500]}"
    write_stage(args, doc, text)


def read_metrics(run_dir):
    """The per-step lines of a run's metrics.jsonl (those with a loss), by step."""
    steps = {}
    try:
        with open(os.path.join(run_dir, "metrics.jsonl")) as f:
            for line in f:
                try:
                    j = json.loads(line)
                except ValueError:
                    continue  # a line cut short by a kill
                if "step" in j and "loss" in j:
                    steps[j["step"]] = j
    except OSError:
        pass
    return steps


def cmd_losses(args):
    """Stage 3: per-step losses of two runs of the same configuration on two devices."""
    a, b = read_metrics(args.run_a), read_metrics(args.run_b)
    rows, diffs = [], []
    for s in sorted(set(a) | set(b)):
        la, lb = a.get(s, {}).get("loss"), b.get(s, {}).get("loss")
        d = abs(la - lb) if la is not None and lb is not None else None
        if d is not None:
            diffs.append(d)
        rows.append([s, fmt(la, "{:.7f}", "-"), fmt(lb, "{:.7f}", "-"), fmt(d, "{:.2e}", "-")])
    both = [s for s in a if s in b]
    max_diff = max(diffs) if diffs else None
    complete = len(both) == args.steps  # (a run killed after its last step still counts)
    doc = {"status": "ok" if complete else "failed", "device_a": args.dev_a,
           "device_b": args.dev_b, "precision": "fp32", "steps_compared": len(both),
           "steps_expected": args.steps, "max_abs_diff": max_diff, "tolerance": args.tol,
           "within_tolerance": (max_diff is not None and max_diff <= args.tol and complete),
           "losses_a": [a[s]["loss"] for s in sorted(a)], "losses_b": [b[s]["loss"] for s in sorted(b)],
           "exit_status_a": args.rc_a, "exit_status_b": args.rc_b,
           "headline": f"max |loss {args.dev_a} - loss {args.dev_b}| = {fmt(max_diff, '{:.2e}')} "
                       f"over {len(both)} steps (tolerance {args.tol:g})"}
    if not complete:
        doc["reason"] = (f"{len(both)} of {args.steps} steps in both runs (exit status "
                         f"{args.dev_a} {args.rc_a}, {args.dev_b} {args.rc_b}); see the logs")
        doc["log_tail_a"], doc["log_tail_b"] = tail(args.log_a), tail(args.log_b)
    text = table(["step", f"loss {args.dev_a}", f"loss {args.dev_b}", "|diff|"], rows)
    text += f"\nmax |diff| {fmt(max_diff, '{:.3e}')} vs tolerance {args.tol:g}: " + (
        "within" if doc["within_tolerance"] else "NOT within")
    if not complete:
        text += f"\n\n{args.dev_a} log:\n{doc['log_tail_a']}\n{args.dev_b} log:\n{doc['log_tail_b']}"
    write_stage(args, doc, text)


def flops_per_token_from_log(log):
    """6N + 6LCT (llm.c; as gpt_flops_per_token in src/model/gpt.cpp) from the model line of a
    `greentrain train` log ("GPT 12 layers, 12 heads, 768 wide, context 1024, vocabulary
    50304"), for a run stopped before it wrote summary.json; N as gpt_num_params counts it
    (tied wte, wpe, per block 12C^2 + 13C, the final LayerNorm). None when the line is
    missing."""
    try:
        with open(log, errors="replace") as f:
            text = f.read(20000)
    except (OSError, TypeError):
        return None
    m = re.search(r"GPT (\d+) layers, \d+ heads, (\d+) wide, context (\d+), vocabulary (\d+)", text)
    if not m:
        return None
    L, C, T, V = (int(x) for x in m.groups())
    n = V * C + T * C + L * (12 * C * C + 13 * C) + 2 * C
    return 6.0 * n + 6.0 * L * C * T


def train_stats(run_dir, peak, measured_peak, warm_steps, log=None):
    """Figures of one `greentrain train` run folder: steps, losses, tokens/s (whole run from
    summary.json; steady: median of the per-step figures after warm_steps), MFU (steady
    tokens/s x summary's flops_per_token, 6N + 6LCT as llm.c counts, over the peak), and GPU
    energy: NVML's "gpu" domains of summary.json's run window and, steady, of the log intervals
    after the first (interval power x the interval's step time)."""
    s = load_json(os.path.join(run_dir, "summary.json")) or {}
    m = read_metrics(run_dir)
    st = sorted(m)
    r = {"run_dir": run_dir, "summary_found": bool(s), "steps": len(st),
         "last_loss": m[st[-1]]["loss"] if st else None, "val_loss": s.get("val_loss"),
         "device": s.get("device"), "precision": s.get("precision"), "fusion": s.get("fusion"),
         "attention": s.get("attention"), "cuda_graph": s.get("cuda_graph"),
         "num_params": s.get("num_params"), "flops_per_token": s.get("flops_per_token"),
         "tokens": s.get("tokens"), "tokens_per_s_run": s.get("tokens_per_s")}
    if r["flops_per_token"] is None and log:
        r["flops_per_token"] = flops_per_token_from_log(log)
    warm = [x for x in st if x > warm_steps]
    tps = [m[x]["tokens_per_s"] for x in warm if m[x].get("tokens_per_s")]
    r["tokens_per_s"] = statistics.median(tps) if tps else None
    r["steady_steps"] = len(tps)
    f = r["flops_per_token"]
    tflops = r["tokens_per_s"] * f / 1e12 if r["tokens_per_s"] and f else None
    r["model_tflops"] = tflops
    r["mfu_datasheet"] = tflops / peak if tflops and peak else None
    r["mfu_measured_peak"] = tflops / measured_peak if tflops and measured_peak else None
    # whole run window (summary.json)
    e = s.get("energy") or {}
    gpu = [d for d in e.get("domains", []) if d.get("domain") == "gpu"]
    r["energy_method"] = e.get("method")
    if gpu:
        gjs = [d.get("energy_j") for d in gpu]
        gj = sum(gjs) if all(x is not None for x in gjs) else None  # unknown is not 0
        r["gpu_sensors"] = sorted({d.get("sensor") for d in gpu})
        r["gpu_joules_per_token_run"] = gj / s["tokens"] if gj is not None and s.get("tokens") else None
        if gj is None:
            r["gpu_energy_unknown_reason"] = (
                f"{gjs.count(None)} of {len(gjs)} GPU domains without energy_j in summary.json")
        w = [d.get("avg_power_w") for d in gpu]
        r["gpu_avg_w_run"] = sum(w) if all(x is not None for x in w) else None
        r["gpu_energy_estimated"] = any(d.get("estimated") for d in gpu)
    else:
        r["gpu_joules_per_token_run"] = r["gpu_avg_w_run"] = None
        r["gpu_energy_unknown_reason"] = (
            "no gpu domain in summary.json's energy (NVML not read by this run): "
            + (s.get("energy_unknown_reason") or e.get("method") or "no summary.json"))
    r["joules_per_token_all_domains_run"] = s.get("joules_per_token")
    # steady: log intervals after the first
    prev, ivals = 0, []
    for x in st:
        rec = m[x]
        if "energy_interval_tokens" in rec:
            secs = sum(m[y].get("step_time_s", 0) for y in st if prev < y <= x)
            ivals.append((prev, x, rec, secs))
            prev = x
    gj = gt = secs_all = 0.0
    ok = False
    skipped = 0
    for lo, hi, rec, secs in ivals:
        if lo < warm_steps:
            continue
        w = (rec.get("power_w_by_domain") or {}).get("gpu")
        if w is None:  # e.g. a last interval shorter than the counter's refresh: left out
            skipped += 1
            continue
        ok = True
        gj += w * secs
        gt += rec["energy_interval_tokens"]
        secs_all += secs
    r["gpu_joules_per_token"] = gj / gt if ok and gt else None
    r["gpu_avg_w"] = gj / secs_all if ok and secs_all else None
    r["tokens_per_joule_gpu"] = gt / gj if ok and gj else None
    r["steady_intervals_without_gpu_power"] = skipped
    if r["gpu_joules_per_token"] is None:
        r["gpu_energy_steady_unknown_reason"] = (
            "no log interval after the warm-up steps with a gpu power figure "
            f"({len(ivals)} intervals in metrics.jsonl)")
    return r


def torch_rows(tj, gt):
    rows, ratios = [], {}
    for mode in ("eager", "compile"):
        t = (tj or {}).get(mode) or {}
        if not t:
            continue
        if t.get("status") != "ok":
            rows.append([f"PyTorch {mode}", t.get("status", "?"), t.get("reason", "")[:60],
                         "", "", "", ""])
            continue
        r_tps = gt["tokens_per_s"] / t["tokens_per_s"] if gt.get("tokens_per_s") and t.get("tokens_per_s") else None
        r_jpt = (gt["gpu_joules_per_token"] / t["joules_per_token"]
                 if gt.get("gpu_joules_per_token") and t.get("joules_per_token") else None)
        ratios[mode] = {"tokens_per_s_greentrain_over_torch": r_tps,
                        "joules_per_token_greentrain_over_torch": r_jpt}
        rows.append([f"PyTorch {mode}", fmt(t.get("tokens_per_s"), "{:.0f}"),
                     fmt(t.get("mfu_datasheet"), "{:.1%}"),
                     fmt(t.get("joules_per_token"), "{:.3e}"), fmt(t.get("avg_w"), "{:.0f}"),
                     fmt(r_tps, "{:.2f}x"), fmt(r_jpt, "{:.2f}x")])
    return rows, ratios


def read_profile(log):
    """The op table `greentrain train` prints under GT_PROFILE (backend/profiling.h): one dict
    per op (op, calls, seconds, percent, gflops or None); None when the log has no table."""
    rows, inside = [], False
    try:
        with open(log, errors="replace") as f:
            for line in f:
                w = line.split()
                if w[:3] == ["op", "calls", "seconds"]:
                    rows, inside = [], True
                elif inside and w and w[0] == "total":
                    inside = False
                elif inside and len(w) >= 4:
                    try:
                        rows.append({"op": w[0], "calls": int(w[1]), "seconds": float(w[2]),
                                     "percent": float(w[3].rstrip("%")),
                                     "gflops": float(w[4]) if len(w) > 4 else None})
                    except ValueError:
                        inside = False
    except OSError:
        return None
    return rows or None


def cmd_gpt2(args):
    """Stage 4: greentrain's GPT-2 124M bf16 run, beside PyTorch's where it ran."""
    gt = train_stats(args.run, args.peak, args.measured_peak, args.warm, args.log)
    tj = load_json(args.torch_json) if args.torch_json else None
    ok = gt["steps"] == args.steps  # (a run stopped after its last step, e.g. while saving, counts)
    doc = {"status": "ok" if ok else "failed", "model": "GPT-2 124M (12 layers, 768 wide, 12 "
           "heads, context 1024, vocabulary 50304)", "batch": args.batch, "steps": args.steps,
           "datasheet_bf16_tflops": args.peak, "measured_bf16_tflops": args.measured_peak,
           "greentrain": gt, "torch": tj if tj else {"status": "skipped", "reason": args.torch_reason},
           "exit_status": args.rc}
    if not ok:
        doc["reason"] = f"{gt['steps']} of {args.steps} steps (exit status {args.rc})"
        doc["log_tail"] = tail(args.log)
    rows = [[f"greentrain {args.precision}", fmt(gt["tokens_per_s"], "{:.0f}"),
             fmt(gt["mfu_datasheet"], "{:.1%}"), fmt(gt["gpu_joules_per_token"], "{:.3e}"),
             fmt(gt["gpu_avg_w"], "{:.0f}"), "1.00x", "1.00x"]]
    # the same run with one setting changed: train.attention = cudnn, train.cuda_graph = off
    for key, label, run, log, rc in [
            ("greentrain_cudnn_attention", "cuDNN attention", args.cudnn_run, args.cudnn_log,
             args.rc_cudnn),
            ("greentrain_no_cuda_graph", "no CUDA graph", args.nograph_run, args.nograph_log,
             args.rc_nograph)]:
        if not run:
            continue
        cu = train_stats(run, args.peak, args.measured_peak, args.warm, log)
        cu_ok = cu["steps"] == args.steps
        doc[key] = {**cu, "exit_status": rc, **(
            {} if cu_ok else {"reason": f"{cu['steps']} of {args.steps} steps (exit status "
                                        f"{rc})", "log_tail": tail(log)})}
        own_tps = gt["tokens_per_s"]
        rows.append([f"greentrain {args.precision}, {label}", fmt(cu["tokens_per_s"], "{:.0f}"),
                     fmt(cu["mfu_datasheet"], "{:.1%}"), fmt(cu["gpu_joules_per_token"], "{:.3e}"),
                     fmt(cu["gpu_avg_w"], "{:.0f}"),
                     fmt(cu["tokens_per_s"] / own_tps if cu["tokens_per_s"] and own_tps else None, "{:.2f}x"),
                     "-"])
    prof = read_profile(args.profile_log) if args.profile_log else None
    if prof is not None:
        doc["profile"] = prof
    trows, ratios = torch_rows(tj, gt)
    doc["ratios"] = ratios
    doc["headline"] = (f"{fmt(gt['tokens_per_s'], '{:.0f}')} tokens/s, MFU "
                       f"{fmt(gt['mfu_datasheet'], '{:.1%}')} (datasheet), "
                       f"{fmt(gt['mfu_measured_peak'], '{:.1%}')} (measured peak), GPU "
                       f"{fmt(gt['gpu_joules_per_token'], '{:.3e}')} J/token")
    for mode, rr in ratios.items():
        doc["headline"] += f"; {fmt(rr['tokens_per_s_greentrain_over_torch'], '{:.2f}')}x torch {mode}"
    text = table(["run", "tokens/s", "MFU (sheet)", "GPU J/token", "GPU W", "gt/torch tok/s",
                  "gt/torch J/tok"], rows + trows)
    text += (f"\n\nsteady: median of the steps after step {args.warm}; MFU = tokens/s x "
             f"{fmt(gt['flops_per_token'], '{:.4g}')} FLOP/token (6N + 6LCT, llm.c) / "
             f"{fmt(args.peak, '{:.0f}')} TFLOP/s datasheet; against the measured cuBLASLt peak "
             f"({fmt(args.measured_peak, '{:.0f}')} TFLOP/s): {fmt(gt['mfu_measured_peak'], '{:.1%}')}"
             f"\nwhole run (summary.json): {fmt(gt['tokens_per_s_run'], '{:.0f}')} tokens/s, GPU "
             f"{fmt(gt['gpu_joules_per_token_run'], '{:.3e}')} J/token, "
             f"{fmt(gt['gpu_avg_w_run'], '{:.0f}')} W average; all domains "
             f"{fmt(gt['joules_per_token_all_domains_run'], '{:.3e}')} J/token ({(gt['energy_method'] or '?')[:90]})")
    if not tj:
        text += f"\nPyTorch: skipped: {args.torch_reason}"
    if prof:
        text += "\n\nper op (GT_PROFILE, 20 steps with the first, own attention; each op between two synchronizations):\n"
        text += table(["op", "calls", "s", "%", "GFLOP/s"],
                      [[r["op"], r["calls"], fmt(r["seconds"], "{:.3f}"), fmt(r["percent"], "{:.1f}"),
                        fmt(r["gflops"], "{:.0f}")] for r in prof])
    if not ok:
        text += "\n\nlog:\n" + doc["log_tail"]
    write_stage(args, doc, text)


def cmd_peak(args):
    """Stage 5: gt_cuda_matmul_peak's JSON line beside the datasheet figure."""
    j = None
    try:
        with open(args.result) as f:
            for line in f:
                if line.startswith("{"):
                    j = json.loads(line)
    except (OSError, ValueError):
        pass
    if args.rc != 0 or not j:
        doc = {"status": "failed", "reason": f"exit status {args.rc}; no JSON line",
               "log_tail": tail(args.result)}
        return write_stage(args, doc, doc["log_tail"])
    frac = j["median_tflops"] / args.peak if args.peak else None
    doc = {"status": "ok", "measured": j, "datasheet_bf16_tflops": args.peak,
           "datasheet_source": args.source, "measured_over_datasheet": frac,
           "headline": f"{j['median_tflops']:.0f} TFLOP/s measured (median) vs "
                       f"{fmt(args.peak, '{:.0f}')} datasheet ({fmt(frac, '{:.0%}')})"}
    rows = [["measured, median", f"{j['median_tflops']:.1f}"], ["measured, best", f"{j['best_tflops']:.1f}"],
            ["datasheet (dense)", fmt(args.peak, "{:.0f}")], ["measured / datasheet", fmt(frac, "{:.1%}")]]
    text = table(["bf16 matrix product", "TFLOP/s"], rows)
    text += (f"\n{j['m']}x{j['n']}x{j['k']} cuBLASLt, bf16 operands, fp32 accumulation, "
             f"{j['runs']} runs of {j['products_per_run']}; datasheet: {args.source}")
    write_stage(args, doc, text)


def cmd_fp8(args):
    """Stage 6: GPT-2 XL bf16 and fp8 runs: tokens/s ratio, loss after the last step."""
    b = train_stats(args.bf16_run, args.peak, args.measured_peak, args.warm, args.bf16_log)
    doc = {"model": "GPT-2 XL (48 layers, 1600 wide, 25 heads, context 1024, vocabulary 50304)",
           "batch": args.batch, "steps": args.steps, "bf16": b, "exit_status_bf16": args.rc_bf16,
           "datasheet_bf16_tflops": args.peak, "datasheet_fp8_tflops": args.fp8_peak,
           "mfu_basis": "each precision's own dense datasheet peak"}
    b_ok = b["steps"] == args.steps  # (stopped after the last step counts: figures are in metrics.jsonl)
    if args.fp8_skip:
        doc["fp8"] = {"status": "skipped", "reason": args.fp8_skip}
        f, f_ok = None, False
    else:
        # fp8's MFU is over the fp8 dense peak (2x bf16's on Hopper); the measured peak is a
        # bf16 product's, so it does not apply
        f = train_stats(args.fp8_run, args.fp8_peak, None, args.warm, args.fp8_log)
        f_ok = f["steps"] == args.steps
        doc["fp8"] = f
        doc["exit_status_fp8"] = args.rc_fp8
        if not f_ok:
            doc["fp8"]["status"] = "failed"
            doc["fp8"]["log_tail"] = tail(args.fp8_log)
    ratio = f["tokens_per_s"] / b["tokens_per_s"] if f_ok and b_ok and f["tokens_per_s"] and b["tokens_per_s"] else None
    rel = abs(f["last_loss"] - b["last_loss"]) / b["last_loss"] if ratio and b["last_loss"] else None
    doc.update({"tokens_per_s_fp8_over_bf16": ratio, "loss_rel_diff": rel,
                "target_speedup": 1.3, "target_loss_rel_diff": 0.01})
    if b_ok and (f_ok or args.fp8_skip):
        doc["status"] = "ok"
    else:
        doc["status"] = "failed"
        doc["reason"] = (f"bf16: {b['steps']}/{args.steps} steps (exit {args.rc_bf16})"
                         + ("" if args.fp8_skip else
                            f"; fp8: {f['steps']}/{args.steps} steps (exit {args.rc_fp8})"))
        if not b_ok:
            doc["bf16"]["log_tail"] = tail(args.bf16_log)
    doc["headline"] = (f"fp8/bf16 tokens/s {fmt(ratio, '{:.2f}x')}, loss after {args.steps} steps "
                       f"differs {fmt(rel, '{:.2%}')}" if not args.fp8_skip
                       else f"fp8 skipped: {args.fp8_skip}")
    rows = []
    for name, r, good in ((args.precision, b, b_ok), ("fp8", f, f_ok)):
        if r is None:
            rows.append([name, "skipped", "", "", "", args.fp8_skip])
            continue
        rows.append([name, fmt(r["tokens_per_s"], "{:.0f}"), fmt(r["mfu_datasheet"], "{:.1%}"),
                     fmt(r["last_loss"], "{:.4f}"), fmt(r["gpu_joules_per_token"], "{:.3e}"),
                     "" if good else f"FAILED ({r['steps']}/{args.steps} steps)"])
    text = table(["precision", "tokens/s", "MFU (own sheet peak)", f"loss @{args.steps}", "GPU J/token",
                  "note"], rows)
    text += (f"\nfp8/bf16 tokens/s: {fmt(ratio, '{:.3f}x')} (target >= 1.3x); loss relative "
             f"difference {fmt(rel, '{:.3%}')} (target <= 1%)")
    for name in ("bf16", "fp8"):
        lt = (doc.get(name) or {}).get("log_tail")
        if lt:
            text += f"\n\n{name} log:\n{lt}"
    write_stage(args, doc, text)


def cmd_ablate(args):
    """Stage 7: `greentrain ablate`'s ablation.json rows."""
    j = load_json(os.path.join(args.dir, "ablation.json"))
    rows_j = j if isinstance(j, list) else (j or {}).get("rows", [])
    if args.rc != 0 or not rows_j:
        doc = {"status": "failed", "reason": f"exit status {args.rc}; "
               + ("no ablation.json" if not rows_j else "rows incomplete"), "log_tail": tail(args.log, 30),
               "rows": rows_j}
        return write_stage(args, doc, doc["log_tail"])
    doc = {"status": "ok", "rows": rows_j, "device": args.device, "model": args.model,
           "headline": ", ".join(f"{r.get('row')} {fmt(r.get('tokens_per_s'), '{:.0f}')} tok/s "
                                 f"{fmt(r.get('joules_per_token'), '{:.2e}')} J/tok" for r in rows_j)}
    rows = [[r.get("row"), r.get("precision") or "-", r.get("fusion") or "-", r.get("recompute") or "-",
             r.get("micro_batch") or "-", fmt(r.get("tokens_per_s"), "{:.0f}"),
             fmt(r.get("joules_per_token"), "{:.3e}"), fmt(r.get("speedup_vs_baseline"), "{:.2f}x"),
             fmt(r.get("factor_vs_baseline"), "{:.2f}x"), fmt(r.get("loss"), "{:.4f}"),
             r.get("energy_basis") or r.get("energy") or r.get("why") or ""] for r in rows_j]
    text = table(["row", "precision", "fusion", "recompute", "batch", "tokens/s", "J/token",
                  "speed vs base", "tok/J vs base", "loss", "energy"], rows)
    text += f"\n{args.model} on {args.device}; the full table is in {os.path.basename(args.dir)}/"
    write_stage(args, doc, text)


def cmd_publish(args):
    """OUT/results.json and OUT/logs.tgz from the work folder (both written to a temporary name
    and renamed, so a check cut short leaves the last complete pair)."""
    docs = []
    for num in sorted(STAGES):
        d = load_json(stage_path(args.work, num, "json"))
        if d:
            docs.append(d)
    logs = os.path.join(args.work, "logs")
    tails = {}
    if os.path.isdir(logs):
        for name in sorted(os.listdir(logs)):
            t = tail(os.path.join(logs, name), 12)
            if t:
                tails[name] = t
    text = ""
    try:
        with open(os.path.join(args.work, "summary.txt")) as f:
            text = f.read()
    except OSError:
        pass
    doc = {"schema": 1, "tool": "bench/gpu-check.sh", "rehearsal": bool(args.rehearse),
           "budget_s": args.budget, "elapsed_s": args.elapsed, "state": args.state,
           "stages": docs, "summary": text, "log_tails": tails}
    os.makedirs(args.out, exist_ok=True)
    write_atomic(os.path.join(args.out, "results.json"), json.dumps(doc, indent=2) + "\n")
    tmp = os.path.join(args.out, f".logs.tgz.tmp{os.getpid()}")
    with tarfile.open(tmp, "w:gz") as t:
        for root, _, files in os.walk(args.work):
            for name in sorted(files):
                path = os.path.join(root, name)
                rel = os.path.relpath(path, args.work)
                if name.endswith((".txt", ".log", ".json", ".xml", ".jsonl", ".csv", ".out")) and \
                        os.path.getsize(path) < 8 << 20:
                    t.add(path, arcname=os.path.join("gpu-check", rel))
    os.replace(tmp, os.path.join(args.out, "logs.tgz"))


def cmd_kernel_bench(args):
    """Stage 8: every own kernel timed (bench/gpu_kernel_bench.cu's JSON lines) beside the
    measured copy bandwidth."""
    rows, copy = [], None
    try:
        with open(args.result) as f:
            for line in f:
                line = line.strip()
                if line.startswith("{"):
                    r = json.loads(line)
                    if r["kernel"].startswith("cudaMemcpy"):
                        copy = r["gb_s"]
                    else:
                        rows.append(r)
    except (OSError, ValueError) as e:
        doc = {"status": "failed", "reason": f"no results ({e}); exit status {args.rc}",
               "log_tail": tail(args.result, 20)}
        return write_stage(args, doc, doc["log_tail"])
    for r in rows:
        r["fraction_of_copy_bandwidth"] = r["gb_s"] / copy if copy else None
    ok = args.rc == 0 and rows
    doc = {"status": "ok" if ok else "failed", "copy_gb_s": copy, "kernels": rows,
           "headline": f"{len(rows)} kernel timings; copy bandwidth {fmt(copy, '{:.0f}')} GB/s"}
    if not ok:
        doc["reason"] = f"exit status {args.rc}" if rows else "no kernel timings"
    table_rows = [[r["shape"], r["kernel"], f"{r['ms']:.3f}", f"{r['gb_s']:.0f}",
                   fmt(r.get("fraction_of_copy_bandwidth"), "{:.0%}", "-"),
                   fmt(r.get("tflop_s"), "{:.0f}", "-")] for r in rows]
    write_stage(args, doc, table(["shape", "kernel", "ms", "GB/s", "of copy", "TFLOP/s"], table_rows))


def cmd_sanitizer(args):
    """Stage 9: compute-sanitizer's runs (memcheck, racecheck) on a tiny model, by their
    "ERROR SUMMARY" lines."""
    runs = []
    for spec in args.runs:
        tool, prec, log, rc = spec.split(":", 3)
        text = ""
        try:
            with open(log, errors="replace") as f:
                text = f.read()
        except OSError:
            pass
        # memcheck: "ERROR SUMMARY: N errors"; racecheck: "RACECHECK SUMMARY: N hazards
        # displayed (E errors, W warnings)"
        m = (re.search(r"ERROR SUMMARY: (\d+) error", text)
             or re.search(r"RACECHECK SUMMARY: \d+ hazards? displayed \((\d+) error", text))
        errors = int(m.group(1)) if m else None
        runs.append({"tool": tool, "precision": prec, "errors": errors, "exit_status": int(rc),
                     "log": os.path.basename(log),
                     "first_errors": re.findall(r"=+ (?:Invalid|Race|Error).*", text)[:5]})
    bad = [r for r in runs if r["errors"] is None or r["errors"] > 0 or r["exit_status"] != 0]
    doc = {"status": "ok" if runs and not bad else "failed", "runs": runs,
           "machine": args.machine,
           "headline": f"{len(runs) - len(bad)}/{len(runs)} runs clean"}
    if bad:
        doc["reason"] = "; ".join(f"{r['tool']} {r['precision']}: "
                                  f"{'no summary' if r['errors'] is None else str(r['errors']) + ' errors'}"
                                  f" (exit {r['exit_status']})" for r in bad)
    write_stage(args, doc, table(["tool", "precision", "errors", "exit"],
                                 [[r["tool"], r["precision"], fmt(r["errors"], "{}"), r["exit_status"]]
                                  for r in runs]))


def cmd_unpack_deb(args):
    """dpkg -x without dpkg: a .deb is an ar archive holding data.tar.{xz,zst,gz}."""
    with open(args.deb, "rb") as f:
        blob = f.read()
    if not blob.startswith(b"!<arch>\n"):
        sys.exit(f"{args.deb}: not a .deb (ar archive)")
    pos = 8
    while pos + 60 <= len(blob):
        name = blob[pos:pos + 16].decode().strip().rstrip("/")
        size = int(blob[pos + 48:pos + 58].decode().strip())
        data = blob[pos + 60:pos + 60 + size]
        pos += 60 + size + (size & 1)
        if name.startswith("data.tar"):
            if name.endswith(".xz"):
                data = lzma.decompress(data)
            elif name.endswith(".zst"):
                sys.exit(f"{args.deb}: {name} is zstd, which Python cannot read; install dpkg or zstd")
            mode = "r:gz" if name.endswith(".gz") else "r:"
            with tarfile.open(fileobj=io.BytesIO(data), mode=mode) as t:
                for m in t.getmembers():
                    if m.name.startswith("/") or ".." in m.name.split("/"):
                        sys.exit(f"{args.deb}: unsafe path {m.name}")
                t.extractall(args.dest)
            return
    sys.exit(f"{args.deb}: no data.tar member")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)

    def stage_parser(name, num, fn):
        s = sub.add_parser(name)
        s.add_argument("out")
        s.add_argument("--seconds", type=float)
        s.add_argument("--rehearse", action="store_true")
        s.set_defaults(stage=num, fn=fn)
        return s

    s = sub.add_parser("shard")
    s.add_argument("path")
    s.add_argument("--tokens", type=int, required=True)
    s.add_argument("--vocab", type=int, required=True)
    s.add_argument("--seed", type=int, default=1)
    s.set_defaults(fn=cmd_shard)

    s = sub.add_parser("peak-of")
    s.add_argument("name")
    s.add_argument("--precision", choices=("bf16", "fp8"), default="bf16")
    s.set_defaults(fn=lambda a: print("{}\t{}".format(*datasheet_peak(a.name, a.precision))))

    s = stage_parser("gpu-state", 0, cmd_gpu_state)
    for k in ("--gpu", "--smi-q", "--nvcc", "--cpu", "--visible"):
        s.add_argument(k, default="")
    s.add_argument("--cores", type=int)

    s = sub.add_parser("skip")
    s.add_argument("out")
    s.add_argument("stage", type=int, choices=sorted(STAGES))
    s.add_argument("reason")
    s.add_argument("--failed", action="store_true")
    s.add_argument("--seconds", type=float)
    s.add_argument("--rehearse", action="store_true")
    s.set_defaults(fn=cmd_skip)

    s = stage_parser("build", 1, cmd_build)
    s.add_argument("--rc", type=int, required=True)
    s.add_argument("--log", required=True)
    s.add_argument("--cmake-line", default="")
    s.add_argument("--targets", nargs="*", default=[])
    s.add_argument("--found", nargs="*", default=[])
    s.add_argument("--jobs", type=int)
    s.add_argument("--configure-s", type=float)
    s.add_argument("--build-s", type=float)
    s.add_argument("--onednn", default="?")
    s.add_argument("--arch", default="?")
    s.add_argument("--deps-prefix", default="")
    s.add_argument("--reason", default="")

    s = stage_parser("optest", 2, cmd_optest)
    s.add_argument("--xml", required=True)
    s.add_argument("--log", required=True)
    s.add_argument("--rc", type=int, required=True)
    s.add_argument("--filter", required=True)

    s = stage_parser("losses", 3, cmd_losses)
    for k in ("--run-a", "--run-b", "--dev-a", "--dev-b", "--log-a", "--log-b"):
        s.add_argument(k, required=True)
    s.add_argument("--rc-a", type=int, required=True)
    s.add_argument("--rc-b", type=int, required=True)
    s.add_argument("--steps", type=int, required=True)
    s.add_argument("--tol", type=float, default=1e-4)

    def perf_args(s):
        s.add_argument("--peak", type=float)
        s.add_argument("--measured-peak", type=float)
        s.add_argument("--steps", type=int, required=True)
        s.add_argument("--batch", type=int)
        s.add_argument("--warm", type=int, default=5)
        s.add_argument("--precision", default="bf16", help="the precision the bf16 runs had")

    s = stage_parser("gpt2", 4, cmd_gpt2)
    perf_args(s)
    s.add_argument("--run", required=True)
    s.add_argument("--log", required=True)
    s.add_argument("--rc", type=int, required=True)
    s.add_argument("--torch-json", default="")
    s.add_argument("--torch-reason", default="")
    s.add_argument("--profile-log", default="")
    s.add_argument("--cudnn-run", default="")
    s.add_argument("--cudnn-log", default="")
    s.add_argument("--rc-cudnn", type=int, default=-1)
    s.add_argument("--nograph-run", default="")
    s.add_argument("--nograph-log", default="")
    s.add_argument("--rc-nograph", type=int, default=-1)

    s = stage_parser("peak", 5, cmd_peak)
    s.add_argument("--result", required=True)
    s.add_argument("--rc", type=int, required=True)
    s.add_argument("--peak", type=float)
    s.add_argument("--source", default="")

    s = stage_parser("fp8", 6, cmd_fp8)
    perf_args(s)
    for k in ("--bf16-run", "--bf16-log", "--fp8-run", "--fp8-log"):
        s.add_argument(k, default="")
    s.add_argument("--rc-bf16", type=int, required=True)
    s.add_argument("--rc-fp8", type=int, default=-1)
    s.add_argument("--fp8-skip", default="")
    s.add_argument("--fp8-peak", type=float, help="dense fp8 datasheet peak, TFLOP/s")

    s = stage_parser("ablate", 7, cmd_ablate)
    s.add_argument("--dir", required=True)
    s.add_argument("--log", required=True)
    s.add_argument("--rc", type=int, required=True)
    s.add_argument("--device", default="cuda")
    s.add_argument("--model", default="")

    s = stage_parser("kernel-bench", 8, cmd_kernel_bench)
    s.add_argument("--result", required=True)
    s.add_argument("--rc", type=int, required=True)

    s = stage_parser("sanitizer", 9, cmd_sanitizer)
    s.add_argument("--runs", nargs="*", default=[], help="TOOL:PRECISION:LOG:EXIT_STATUS")
    s.add_argument("--machine", default="")

    s = sub.add_parser("publish")
    s.add_argument("work")
    s.add_argument("out")
    s.add_argument("--rehearse", action="store_true")
    s.add_argument("--budget", type=float)
    s.add_argument("--elapsed", type=float)
    s.add_argument("--state", default="running")
    s.set_defaults(fn=cmd_publish)

    s = sub.add_parser("summary")
    s.add_argument("out")
    s.set_defaults(fn=lambda a: (summarize(a.out), print(open(os.path.join(a.out, "summary.txt")).read())))

    s = sub.add_parser("unpack-deb")
    s.add_argument("deb")
    s.add_argument("dest")
    s.set_defaults(fn=cmd_unpack_deb)

    args = p.parse_args()
    args.fn(args)


if __name__ == "__main__":
    main()
