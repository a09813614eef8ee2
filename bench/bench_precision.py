#!/usr/bin/env python3
"""greentrain bf16 against PyTorch bf16 autocast on the CPU, side by side in one run.

Same model (GPT-2 style, 6 layers, 384 wide, 6 heads, context 256, character vocabulary of
tinyshakespeare), same batch (8), same thread count (2), same optimizer (AdamW, lr 1e-3);
median step time over the steps after the first. Also measures, in the same run, the bf16 and
fp32 matrix-product peaks reachable here (torch.matmul on large square matrices; PyTorch's CPU
bf16 matmul runs on oneDNN, the library greentrain uses) and reports model FLOPs utilisation
(MFU) against them: model FLOPs per token = 6N + 6*L*C*T (llm.c's count).

With --compile the PyTorch model runs through torch.compile (default mode, PyTorch 2.x);
it compiles in the first step, which is dropped from the median (its time is printed).

Usage: bench/bench_precision.py [--greentrain build/src/cli/greentrain] [--data FILE]
                                [--steps 12] [--threads 2] [--batch 8] [--precision bf16]
                                [--compile]
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


def matmul_peak(torch, dtype, threads, n=2048, reps=5):
    """Best GFLOP/s of an n x n x n product on oneDNN: bf16 torch.matmul (oneDNN in PyTorch's
    CPU build) or, for fp32, a oneDNN (mkldnn) linear layer, since Debian's PyTorch has a
    generic reference BLAS for plain fp32 matmul."""
    if dtype == torch.float32:
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


def torch_run(args, text):
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
    run = torch.compile(model) if args.compile else model
    g = torch.Generator().manual_seed(1)
    times, losses = [], []
    for _ in range(args.steps):
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
    n_params = sum(p.numel() for p in model.parameters())
    peaks = {"bf16": matmul_peak(torch, torch.bfloat16, args.threads),
             "fp32": matmul_peak(torch, torch.float32, args.threads)}
    return {"step_s": statistics.median(times[1:]), "loss": losses[-1], "params": n_params,
            "V": V, "torch": torch.__version__, "peaks": peaks, "first_s": times[0]}


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
        env = dict(os.environ, OMP_WAIT_POLICY=os.environ.get("OMP_WAIT_POLICY", "passive"))
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, env=env)
        recs = [json.loads(l) for l in open(os.path.join(out, "metrics.jsonl"))]
    return {"step_s": statistics.median(r["step_time_s"] for r in recs[1:]),
            "loss": recs[-1]["loss"]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--greentrain", default=os.path.join(ROOT, "build/src/cli/greentrain"))
    ap.add_argument("--data", default=os.path.join(ROOT, "../shared/data/text/tinyshakespeare.txt"))
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--precision", default="bf16", choices=["bf16", "fp32"])
    ap.add_argument("--fusion", default="off", choices=["on", "off"])
    ap.add_argument("--compile", action="store_true", help="torch.compile the PyTorch model")
    args = ap.parse_args()
    import torch
    if args.compile and not hasattr(torch, "compile"):
        sys.exit(f"--compile needs PyTorch 2.x; {sys.executable} has PyTorch {torch.__version__}")
    text = open(args.data, encoding="utf-8").read()
    T, L, C = 256, 6, 384
    tokens = args.batch * T
    gt = greentrain_run(args)
    pt = torch_run(args, text)
    flops_tok = 6 * pt["params"] + 6 * L * C * T
    peak = pt["peaks"][args.precision]
    print(f"model: 6 layers, 384 wide, context 256, {pt['params'] / 1e6:.2f}M parameters; "
          f"batch {args.batch}, {args.threads} threads, {args.precision}, median of {args.steps - 1} steps")
    print(f"python {sys.version.split()[0]} ({sys.executable}), PyTorch {pt['torch']}; first PyTorch "
          f"step ({'with compilation, ' if args.compile else ''}dropped): {pt['first_s']:.1f} s")
    print(f"matmul peak here ({args.precision}, 2048^3 on oneDNN, measured now): {peak:.0f} GFLOP/s "
          f"(bf16 {pt['peaks']['bf16']:.0f}, fp32 {pt['peaks']['fp32']:.0f})")
    rows = [(f"greentrain (fusion {args.fusion})", gt), (f"PyTorch {pt['torch']} "
            f"{'bf16 autocast' if args.precision == 'bf16' else 'fp32'} "
            f"{'compiled' if args.compile else 'eager'}", pt)]
    for name, r in rows:
        tps = tokens / r["step_s"]
        mfu = tps * flops_tok / 1e9 / peak
        print(f"  {name:44s} {r['step_s'] * 1e3:8.1f} ms/step {tps:8.0f} tokens/s  "
              f"MFU {100 * mfu:5.1f} %  loss after {args.steps} steps {r['loss']:.4f}")
    ratio = pt["step_s"] / gt["step_s"]
    print(f"greentrain / PyTorch tokens/s: {ratio:.2f}x (target 1.3x)")
    if pt["torch"].startswith("1."):
        print("note: Debian's PyTorch 1.13 is built with a generic BLAS (BLAS_INFO=generic), so its "
              "fp32 products outside oneDNN are slow; run with PyTorch 2.x from PyPI to compare")
    return 0


if __name__ == "__main__":
    sys.exit(main())
