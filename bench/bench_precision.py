#!/usr/bin/env python3
"""greentrain against PyTorch on the CPU, fp32 or bf16 (autocast), side by side in one run.

Same model (GPT-2 style, 6 layers, 384 wide, 6 heads, context 256, character vocabulary of
tinyshakespeare), same batch (8), same thread count (2), same optimizer (AdamW, lr 1e-3).
The machine is shared and its speed drifts by up to 2x within minutes, so the contenders run
in alternating rounds (greentrain, PyTorch eager, PyTorch compiled with --compile, then the
matrix-product peak), each round dropping its first steps; every figure is the median over
rounds. MFU = model FLOPs per second (6N + 6*L*C*T per token, llm.c's count) over the peak
that greentrain's own products reach in the same round (bench/matmul_peak.cpp, 2048^3, median
of its runs: oneDNN, or the own AMX / AVX512_BF16 kernel where training runs it); PyTorch's
own matmul peak is printed beside it.

Usage: bench/bench_precision.py [--greentrain build/src/cli/greentrain] [--data FILE]
                                [--precision bf16|fp32] [--fusion on|off] [--rounds 3]
                                [--steps 8] [--threads 2] [--batch 8] [--compile]
                                [--omp-wait-policy active|passive]
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
import warnings

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def matmul_peak(torch, dtype, threads, n=2048, reps=5, blas=False):
    """Best GFLOP/s of an n x n x n product on oneDNN: bf16 torch.matmul (oneDNN in PyTorch's
    CPU build) or, for fp32, a oneDNN (mkldnn) linear layer, since Debian's PyTorch has a
    generic reference BLAS for plain fp32 matmul. blas: fp32 torch.matmul instead, on the BLAS
    PyTorch's fp32 layers run on (MKL in PyPI's builds)."""
    if dtype == torch.float32 and not blas:
        import torch.utils.mkldnn as mk

        with warnings.catch_warnings():  # PyTorch 2.x: "torch.jit.script_method is deprecated"
            warnings.simplefilter("ignore", FutureWarning)
            lin = mk.to_mkldnn(torch.nn.Linear(n, n, bias=False))
        x = torch.randn(n, n).to_mkldnn()
        f = lambda: lin(x)
    else:
        a = torch.randn(n, n).to(dtype)
        b = torch.randn(n, n).to(dtype)
        f = lambda: torch.matmul(a, b)
    f()
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        f()
        best = min(best, time.perf_counter() - t0)
    return 2.0 * n**3 / best / 1e9


def torch_trainer(args, text, compiled):
    """A PyTorch model, optimizer and data; returns f(steps) -> (step times, losses)."""
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    torch.set_num_threads(args.threads)
    torch.manual_seed(1337)
    chars = sorted(set(text))
    stoi = {c: i for i, c in enumerate(chars)}
    data = torch.tensor([stoi[c] for c in text], dtype=torch.long)
    V, L, C, NH, T, B = len(chars), 6, 384, 6, 256, args.batch

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1, self.ln_2 = nn.LayerNorm(C), nn.LayerNorm(C)
            self.c_attn, self.c_proj = nn.Linear(C, 3 * C), nn.Linear(C, C)
            self.fc, self.proj = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)

        def forward(self, x):
            q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
            sh = lambda z: z.view(B, T, NH, C // NH).transpose(1, 2)
            att = (sh(q) @ sh(k).transpose(-2, -1)) * (1.0 / math.sqrt(C // NH))
            mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
            att = F.softmax(att.masked_fill(~mask, float("-inf")), dim=-1)
            y = (att @ sh(v)).transpose(1, 2).contiguous().view(B, T, C)
            x = x + self.c_proj(y)
            return x + self.proj(F.gelu(self.fc(self.ln_2(x)), approximate="tanh"))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte, self.wpe = nn.Embedding(V, C), nn.Embedding(T, C)
            self.h = nn.ModuleList([Block() for _ in range(L)])
            self.ln_f = nn.LayerNorm(C)

        def forward(self, idx, tgt):
            x = self.wte(idx) + self.wpe(torch.arange(T))
            for b in self.h:
                x = b(x)
            logits = self.ln_f(x) @ self.wte.weight.t()
            return F.cross_entropy(logits.float().view(-1, V), tgt.view(-1))

    model = GPT()
    # GPT-2 initialisation, as greentrain's (N(0, 0.02), residual projections scaled, zero bias)
    for name, p in model.named_parameters():
        if name.endswith("bias"):
            nn.init.zeros_(p)
        elif "ln_" in name:
            nn.init.ones_(p)
        else:
            std = 0.02 / math.sqrt(2 * L) if name.endswith(("c_proj.weight", "proj.weight")) else 0.02
            nn.init.normal_(p, 0.0, std)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.99), weight_decay=0.1)
    run = torch.compile(model) if compiled else model
    g = torch.Generator().manual_seed(1)
    return lambda steps: torch_steps(torch, model, run, opt, data, g, args, steps, B, T)


def torch_steps(torch, model, run, opt, data, g, args, steps, B, T):
    """Trains `steps` steps; returns the step times (s) and losses."""
    times, losses = [], []
    for _ in range(steps):
        ix = torch.randint(len(data) - T - 1, (B,), generator=g)
        x = torch.stack([data[i : i + T] for i in ix])
        y = torch.stack([data[i + 1 : i + T + 1] for i in ix])
        t0 = time.perf_counter()
        with torch.autocast(device_type="cpu", dtype=torch.bfloat16,
                            enabled=args.precision == "bf16"):
            loss = run(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        times.append(time.perf_counter() - t0)
        losses.append(loss.item())
    return times, losses


def greentrain_run(args):
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "run")
        cmd = [args.greentrain, "train", os.path.join(ROOT, "configs/shakespeare-char.toml"),
               "--data", args.data, "--out", out,
               "--set", f"train.batch_size={args.batch}", "--set", f"train.max_steps={args.steps}",
               "--set", f"train.threads={args.threads}", "--set", f"train.precision={args.precision}",
               "--set", f"train.fusion={args.fusion}", "--set", "train.eval_interval=0",
               "--set", "train.eval_steps=1", "--set", "train.checkpoint_interval=0",
               "--set", "train.learning_rate=1e-3", "--set", "train.warmup_steps=0"]
        # greentrain's own wait policy (a short spin, and the adaptive team: thread_team.h),
        # unless --omp-wait-policy names one; this script set passive before 2026-12-02,
        # which halves greentrain's speed on an idle machine (docs/benchmarks.md)
        env = dict(os.environ, GT_PROFILE="1")
        if args.omp_wait_policy:
            env["OMP_WAIT_POLICY"] = args.omp_wait_policy
        log = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout
        recs = [json.loads(l) for l in open(os.path.join(out, "metrics.jsonl"))]
    return [r["step_time_s"] for r in recs], [r["loss"] for r in recs], op_shares(log)


def op_shares(log):
    """From greentrain's GT_PROFILE table (op, calls, seconds, %, GFLOP/s): the fraction of
    the ops' time spent in matrix products (ops named matmul*) and in attention (attention*)."""
    secs, inside = {}, False
    for line in log.splitlines():
        f = line.split()
        if f[:3] == ["op", "calls", "seconds"]:
            inside = True
        elif inside and (not f or f[0] == "total"):
            break
        elif inside:
            secs[f[0]] = float(f[2])
    total = sum(secs.values()) or float("nan")
    part = lambda prefix: sum(v for k, v in secs.items() if k.startswith(prefix)) / total
    return {"products": part("matmul"), "attention": part("attention")}


def product_peak(args):
    """greentrain's matrix-product GFLOP/s now (median of its runs), per precision: oneDNN, or
    its own kernel (AMX, or AVX512_BF16 without AMX) where training runs that (gt_matmul_peak's
    bf16_kernel)."""
    exe = os.path.join(os.path.dirname(args.greentrain), "..", "..", "bench", "gt_matmul_peak")
    out = subprocess.run([exe, "2048", "5", str(args.threads)], check=True, capture_output=True,
                         text=True).stdout
    r = json.loads(out)
    return {"bf16": r["bf16"]["median"], "fp32": r["fp32"]["median"]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--greentrain", default=os.path.join(ROOT, "build/src/cli/greentrain"))
    ap.add_argument("--data", default=os.path.join(ROOT, "../shared/data/text/tinyshakespeare.txt"))
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--precision", default="bf16", choices=["bf16", "fp32"])
    ap.add_argument("--fusion", default="on", choices=["on", "off"])
    ap.add_argument("--compile", action="store_true", help="torch.compile the PyTorch model")
    ap.add_argument("--omp-wait-policy", choices=["active", "passive"],
                    help="OMP_WAIT_POLICY for greentrain's runs (default: greentrain's own)")
    args = ap.parse_args()
    import torch
    if args.compile and not hasattr(torch, "compile"):
        sys.exit(f"--compile needs PyTorch 2.x; {sys.executable} has PyTorch {torch.__version__}")
    text = open(args.data, encoding="utf-8").read()
    T, L, C, V = 256, 6, 384, len(set(text))
    n_params = V * C + T * C + L * 12 * C * C + L * 13 * C + 2 * C
    flops_tok = 6 * n_params + 6 * L * C * T
    tokens = args.batch * T
    contenders = {"greentrain": None, "torch eager": torch_trainer(args, text, False)}
    if args.compile:
        contenders["torch compiled"] = torch_trainer(args, text, True)
    warm = 2  # steps dropped from each round (warm-up; compilation in round 1)
    times = {k: [] for k in contenders}  # per round: median step time
    first = {k: None for k in contenders}
    loss = {}
    peaks, torch_peaks, blas_peaks, shares = [], [], [], []
    for rnd in range(args.rounds):
        for name, f in contenders.items():
            if f is None:
                t, l, share = greentrain_run(args)
                shares.append(share)
            else:
                t, l = f(args.steps)
            times[name].append(statistics.median(t[warm:]))
            if first[name] is None:
                first[name], loss[name] = t[0], l[-1]
        peaks.append(product_peak(args)[args.precision])
        torch_peaks.append(matmul_peak(torch, torch.bfloat16 if args.precision == "bf16"
                                       else torch.float32, args.threads))
        if args.precision == "fp32" and not torch.__version__.startswith("1."):
            blas_peaks.append(matmul_peak(torch, torch.float32, args.threads, blas=True))
    med = statistics.median
    print(f"model: 6 layers, 384 wide, context 256, {n_params / 1e6:.2f}M parameters; batch "
          f"{args.batch}, {args.threads} threads, {args.precision}; {args.rounds} alternating "
          f"rounds of {args.steps} steps (first {warm} of each dropped); medians over rounds")
    print(f"python {sys.version.split()[0]} ({sys.executable}), PyTorch {torch.__version__}")
    print(f"matmul peak ({args.precision}, 2048^3): greentrain's products {med(peaks):.0f} GFLOP/s "
          f"(rounds: {', '.join(f'{p:.0f}' for p in peaks)}); PyTorch's {med(torch_peaks):.0f}"
          + (f" on oneDNN, {med(blas_peaks):.0f} on its BLAS (its fp32 layers' products)"
             if blas_peaks else ""))
    for name in contenders:
        label = ("greentrain (fusion " + args.fusion + ")" if name == "greentrain" else
                 f"PyTorch {name.split()[1]} ({'bf16 autocast' if args.precision == 'bf16' else 'fp32'})")
        tps = [tokens / s for s in times[name]]
        mfu = [t * flops_tok / 1e9 / p for t, p in zip(tps, peaks)]
        print(f"  {label:40s} {med(times[name]) * 1e3:8.1f} ms/step {med(tps):8.0f} tokens/s  "
              f"MFU {100 * med(mfu):5.1f} %  loss after {args.steps} steps {loss[name]:.4f}"
              f"  (first step {first[name]:.1f} s)")
    best_torch = min((n for n in contenders if n != "greentrain"), key=lambda n: med(times[n]))
    ratios = [b / g for g, b in zip(times["greentrain"], times[best_torch])]
    print(f"greentrain / fastest PyTorch ({best_torch}) tokens/s: {med(ratios):.2f}x "
          f"(rounds: {', '.join(f'{r:.2f}' for r in ratios)}; target 1.3x)")
    # what greentrain could reach at its present product speed: its step less everything
    # else (ceiling_products), or less everything but products and attention
    prod = med(s["products"] for s in shares)
    attn = med(s["attention"] for s in shares)
    print(f"greentrain's step: {100 * prod:.1f} % in matrix products, {100 * attn:.1f} % in "
          f"attention (GT_PROFILE); at this product speed, the ratio could reach at most "
          f"{med(ratios) / prod:.2f}x if every other op took no time, "
          f"{med(ratios) / (prod + attn):.2f}x if every op but products and attention took none")
    if torch.__version__.startswith("1."):
        print("note: Debian's PyTorch 1.13 is built with a generic BLAS (BLAS_INFO=generic), so its "
              "fp32 products outside oneDNN are slow; run with PyTorch 2.x from PyPI to compare")
    return 0


if __name__ == "__main__":
    sys.exit(main())
