#!/usr/bin/env python3
"""Training throughput, greentrain against PyTorch, side by side in one run.

The same GPT (default: nanoGPT's shakespeare-char model, 6 layers, 6 heads, 384 wide,
context 256) at the same micro-batch on the same text, fp32, both with the same thread
count, alternating rounds (greentrain, torch, greentrain, torch, ...) so that machine noise
hits both. Reports the median step time of each (the first 2 steps of every round are
warm-up and dropped), tokens/s, and the ratio greentrain/torch.

With --compile the torch forward and loss run through torch.compile (default mode, PyTorch
2.x); compilation happens in the first step (warm-up, dropped), so compile time is not in
the timings; that first step's time is printed.

Usage: bench/bench_train.py [--greentrain build/src/cli/greentrain] [--steps 10]
                            [--rounds 2] [--batch 8] [--threads 2] [--data PATH] [--compile]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "tests", "parity"))


def greentrain_round(args, out):
    cmd = [args.greentrain, "train", os.path.join(here, "..", "configs", "shakespeare-char.toml"),
           "--data", args.data, "--out", out,
           "--set", f"train.batch_size={args.batch}", "--set", f"train.max_steps={args.steps}",
           "--set", f"train.threads={args.threads}", "--set", "train.eval_interval=0",
           "--set", "train.eval_steps=1", "--set", "train.checkpoint_interval=0",
           "--set", f"model.n_layer={args.n_layer}", "--set", f"model.n_embd={args.n_embd}",
           "--set", f"model.n_head={args.n_head}", "--set", f"model.block_size={args.block}"]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    times = [json.loads(l)["step_time_s"] for l in open(os.path.join(out, "metrics.jsonl"))]
    return times[2:]


def torch_loss(p, x, y, cfg, V):
    import torch.nn.functional as F
    from torch_parity import gpt_forward
    return F.cross_entropy(gpt_forward(p, x, cfg).view(-1, V), y.view(-1))


def torch_round(args, text, loss_fn):
    import torch
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    chars = sorted(set(text))
    stoi = {c: i for i, c in enumerate(chars)}
    data = torch.tensor([stoi[c] for c in text[: len(text) * 9 // 10]], dtype=torch.long)
    C, L, V, T = args.n_embd, args.n_layer, len(chars), args.block
    cfg = {"n_embd": C, "n_head": args.n_head, "n_layer": L}
    p = {"wte.weight": torch.randn(V, C) * 0.02, "wpe.weight": torch.randn(T, C) * 0.02,
         "ln_f.weight": torch.ones(C), "ln_f.bias": torch.zeros(C)}
    for l in range(L):
        h = f"h.{l}."
        p.update({h + "ln_1.weight": torch.ones(C), h + "ln_1.bias": torch.zeros(C),
                  h + "attn.c_attn.weight": torch.randn(C, 3 * C) * 0.02,
                  h + "attn.c_attn.bias": torch.zeros(3 * C),
                  h + "attn.c_proj.weight": torch.randn(C, C) * 0.02,
                  h + "attn.c_proj.bias": torch.zeros(C),
                  h + "ln_2.weight": torch.ones(C), h + "ln_2.bias": torch.zeros(C),
                  h + "mlp.c_fc.weight": torch.randn(C, 4 * C) * 0.02,
                  h + "mlp.c_fc.bias": torch.zeros(4 * C),
                  h + "mlp.c_proj.weight": torch.randn(4 * C, C) * 0.02,
                  h + "mlp.c_proj.bias": torch.zeros(C)})
    for v in p.values():
        v.requires_grad_(True)
    opt = torch.optim.AdamW(list(p.values()), lr=1e-3, betas=(0.9, 0.99), weight_decay=0.1)
    times = []
    for _ in range(args.steps):
        ix = torch.randint(len(data) - T - 1, (args.batch,))
        x = torch.stack([data[i:i + T] for i in ix])
        y = torch.stack([data[i + 1:i + 1 + T] for i in ix])
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(p, x, y, cfg, V)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(list(p.values()), 1.0)
        opt.step()
        times.append(time.perf_counter() - t0)
    return times


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--greentrain", default=os.path.join(here, "..", "build", "src", "cli", "greentrain"))
    ap.add_argument("--data", default=os.path.join(here, "..", "..", "shared", "data", "text", "tinyshakespeare.txt"))
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--n-layer", type=int, default=6)
    ap.add_argument("--n-head", type=int, default=6)
    ap.add_argument("--n-embd", type=int, default=384)
    ap.add_argument("--block", type=int, default=256)
    ap.add_argument("--compile", action="store_true", help="torch.compile the torch forward and loss")
    args = ap.parse_args()
    if args.steps <= 2:
        ap.error("--steps must be more than the 2 warm-up steps")
    text = open(args.data, encoding="utf-8").read()
    import torch
    loss_fn = torch_loss
    if args.compile:
        if not hasattr(torch, "compile"):
            sys.exit(f"--compile needs PyTorch 2.x; {sys.executable} has PyTorch {torch.__version__}")
        loss_fn = torch.compile(torch_loss)
    g, t, first = [], [], []
    with tempfile.TemporaryDirectory() as d:
        for r in range(args.rounds):
            g += greentrain_round(args, os.path.join(d, f"run{r}"))
            times = torch_round(args, text, loss_fn)
            t += times[2:]
            first.append(times[0])
    tokens = args.batch * args.block
    gm, tm = statistics.median(g), statistics.median(t)
    print(f"model: {args.n_layer} layers, {args.n_embd} wide, context {args.block}, batch {args.batch}, "
          f"{args.threads} threads, fp32; {len(g)} + {len(t)} timed steps")
    print(f"python {sys.version.split()[0]} ({sys.executable}), PyTorch {torch.__version__} "
          f"{'torch.compile' if args.compile else 'eager'}; first torch step of each round (warm-up, "
          f"{'with compilation, ' if args.compile else ''}dropped): {', '.join(f'{s:.1f}' for s in first)} s")
    print(f"greentrain        median step {gm * 1000:8.1f} ms  {tokens / gm:8.0f} tokens/s")
    print(f"PyTorch {torch.__version__:9s} median step {tm * 1000:8.1f} ms  {tokens / tm:8.0f} tokens/s")
    print(f"ratio greentrain/PyTorch: {tm / gm:.2f}x tokens/s")


if __name__ == "__main__":
    main()
