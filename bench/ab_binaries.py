#!/usr/bin/env python3
"""Two greentrain binaries on the same training run, alternating, for an A/B of a change.

Each round trains `--steps` steps with binary A, then with binary B (then A, B, ...), on the
same configuration, precision and thread count, so that noise from a shared machine hits
both. The first 2 steps of every round are warm-up and dropped. Prints, per precision, the
median step time and tokens/s of each binary and the ratio B/A of their tokens/s, and the
CPU model.

Usage: bench/ab_binaries.py A_BINARY B_BINARY [--config configs/shakespeare-char.toml]
           [--data FILE] [--precisions fp32,bf16] [--rounds 4] [--steps 6] [--batch 8]
           [--threads 2] [--set KEY=VALUE ...]
"""
import argparse
import json
import os
import statistics
import subprocess
import tempfile

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def cpu_model():
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "unknown"


def run(binary, args, precision, out):
    cmd = [binary, "train", args.config, "--data", args.data, "--out", out,
           "--set", f"train.batch_size={args.batch}", "--set", f"train.max_steps={args.steps}",
           "--set", f"train.threads={args.threads}", "--set", f"train.precision={precision}",
           "--set", "train.eval_interval=0", "--set", "train.eval_steps=1",
           "--set", "train.checkpoint_interval=0"]
    for kv in args.set:
        cmd += ["--set", kv]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    recs = [json.loads(l) for l in open(os.path.join(out, "metrics.jsonl"))]
    return [r["step_time_s"] for r in recs[2:]], recs[0]["tokens_per_s"] * recs[0]["step_time_s"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--config", default=os.path.join(ROOT, "configs/shakespeare-char.toml"))
    ap.add_argument("--data", default=os.path.join(ROOT, "../shared/data/text/tinyshakespeare.txt"))
    ap.add_argument("--precisions", default="fp32,bf16")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="an extra configuration override for both binaries (repeatable), "
                         "e.g. train.fusion=on")
    args = ap.parse_args()
    print(f"CPU: {cpu_model()}, {args.threads} threads; A = {args.a}; B = {args.b}")
    with tempfile.TemporaryDirectory() as tmp:
        for prec in args.precisions.split(","):
            times = {"A": [], "B": []}
            tokens = 0
            for r in range(args.rounds):
                for name, binary in (("A", args.a), ("B", args.b)):
                    t, tokens = run(binary, args, prec, os.path.join(tmp, f"{prec}-{name}-{r}"))
                    times[name] += t
            med = {k: statistics.median(v) for k, v in times.items()}
            for k in ("A", "B"):
                print(f"{prec} {k}: median step {med[k]*1000:.1f} ms over {len(times[k])} steps, "
                      f"{tokens / med[k]:.0f} tokens/s")
            print(f"{prec} tokens/s B/A = {med['A'] / med['B']:.4f}")


if __name__ == "__main__":
    main()
