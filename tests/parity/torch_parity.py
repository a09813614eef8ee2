#!/usr/bin/env python3
"""Parity of greentrain's fp32 engine with PyTorch.

Builds the same GPT-2 model in PyTorch, loads greentrain's initial weights (exchanged
through safetensors), runs the same batch and 10 AdamW steps (with gradient clipping),
and compares logits, loss, every gradient and the 10 losses.
fp32 tolerances: loss within 1e-5 relative, gradients within 1e-4 (max abs difference
over the tensor's max abs value), logits within 1e-4.

With --bf16: greentrain's bf16 policy against PyTorch's bf16 autocast; the 10 losses must
agree within 2e-2 relative (bf16 keeps 8 bits of mantissa).

With --fused: greentrain's fused forms (train.fusion=on: residual+LayerNorm, attention with
online softmax, GELU and its backward fused into the MLP's products, softmax+cross-entropy)
against the same PyTorch model, at the same tolerances.

Usage: torch_parity.py PARITY_DUMP_BINARY [--bf16] [--fused]
(exit 77 = skipped: PyTorch not installed)
"""
import json
import os
import struct
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import torch
    import torch.nn.functional as F
except ImportError as e:  # pragma: no cover
    print(f"SKIP: PyTorch/numpy not importable ({e}); install python3-torch", file=sys.stderr)
    sys.exit(77)


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        assert e["dtype"] == "F32", (name, e["dtype"])
        b, end = e["data_offsets"]
        arr = np.frombuffer(data[8 + n + b:8 + n + end], dtype="<f4").reshape(e["shape"])
        out[name] = torch.tensor(arr.copy())
    return out


def gpt_forward(p, idx, cfg):
    """GPT-2 forward with Hugging Face Conv1D layouts (weight (in, out))."""
    B, T = idx.shape
    C, nh, L = cfg["n_embd"], cfg["n_head"], cfg["n_layer"]
    x = p["wte.weight"][idx] + p["wpe.weight"][:T]
    for l in range(L):
        h = f"h.{l}."
        a = F.layer_norm(x, (C,), p[h + "ln_1.weight"], p[h + "ln_1.bias"], 1e-5)
        qkv = a @ p[h + "attn.c_attn.weight"] + p[h + "attn.c_attn.bias"]
        q, k, v = qkv.split(C, dim=2)
        q = q.view(B, T, nh, C // nh).transpose(1, 2)
        k = k.view(B, T, nh, C // nh).transpose(1, 2)
        v = v.view(B, T, nh, C // nh).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) / (C // nh) ** 0.5
        mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
        att = att.masked_fill(~mask, float("-inf")).softmax(-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        x = x + y @ p[h + "attn.c_proj.weight"] + p[h + "attn.c_proj.bias"]
        m = F.layer_norm(x, (C,), p[h + "ln_2.weight"], p[h + "ln_2.bias"], 1e-5)
        m = F.gelu(m @ p[h + "mlp.c_fc.weight"] + p[h + "mlp.c_fc.bias"], approximate="tanh")
        x = x + m @ p[h + "mlp.c_proj.weight"] + p[h + "mlp.c_proj.bias"]
    x = F.layer_norm(x, (C,), p["ln_f.weight"], p["ln_f.bias"], 1e-5)
    return x @ p["wte.weight"].t()


def make_adamw(params, cfg):
    """torch AdamW as greentrain runs it: weight decay on matrices (dim >= 2) only."""
    decay = [p for n, p in params.items() if p.dim() >= 2]
    no_decay = [p for n, p in params.items() if p.dim() < 2]
    return torch.optim.AdamW(
        [{"params": decay, "weight_decay": cfg["weight_decay"]},
         {"params": no_decay, "weight_decay": 0.0}],
        lr=cfg["lr"], betas=(cfg["beta1"], cfg["beta2"]), eps=cfg["eps"])


def adamw_losses(init, idx, tgt, cfg, bf16=False, steps=10):
    """Losses of `steps` AdamW steps (with gradient clipping) on one batch from weights
    `init`; with bf16 the forward runs under PyTorch's CPU bf16 autocast."""
    params = {k: v.clone().requires_grad_(True) for k, v in init.items()}
    opt = make_adamw(params, cfg)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            lg = gpt_forward(params, idx, cfg)
        l = F.cross_entropy(lg.float().view(-1, lg.size(-1)), tgt.view(-1))
        l.backward()
        torch.nn.utils.clip_grad_norm_(list(params.values()), cfg["grad_clip"])
        opt.step()
        losses.append(l.item())
    return losses


def compare_losses(ours, theirs, tol, our_name, their_name):
    """Prints both loss curves; returns a failure line per step whose relative error > tol."""
    failures = []
    for i, (a, b) in enumerate(zip(ours, theirs)):
        e = abs(a - b) / abs(b)
        print(f"step {i + 1:2d}: {our_name} {a:.7f} {their_name} {b:.7f} rel err {e:.1e}")
        if e > tol:
            failures.append(f"{our_name} loss after {i} AdamW steps differs: {e:.2e}")
    return failures


def rel_err(a, b):
    return float((a - b).abs().max() / max(b.abs().max().item(), 1e-12))


def bf16_main(dump_bin, fused):
    with tempfile.TemporaryDirectory() as d:
        subprocess.run([dump_bin, d, "bf16"] + (["fused"] if fused else []), check=True)
        meta = json.load(open(os.path.join(d, "parity.json")))
        init = read_safetensors(os.path.join(d, "init.safetensors"))
    cfg = meta["config"]
    B, T = cfg["batch_size"], cfg["block_size"]
    idx = torch.tensor(meta["inputs"]).view(B, T)
    tgt = torch.tensor(meta["targets"]).view(B, T)
    failures = compare_losses(meta["losses"], adamw_losses(init, idx, tgt, cfg, bf16=True), 2e-2,
                              "greentrain bf16", "torch autocast bf16")
    if failures:
        print("FAIL:\n  " + "\n  ".join(failures))
        return 1
    print("PASS: greentrain bf16 matches PyTorch bf16 autocast", torch.__version__)
    return 0


def main():
    torch.set_num_threads(2)
    dump_bin = sys.argv[1]
    fused = "--fused" in sys.argv[2:]
    if "--bf16" in sys.argv[2:]:
        return bf16_main(dump_bin, fused)
    with tempfile.TemporaryDirectory() as d:
        subprocess.run([dump_bin, d, "fp32"] + (["fused"] if fused else []), check=True)
        meta = json.load(open(os.path.join(d, "parity.json")))
        init = read_safetensors(os.path.join(d, "init.safetensors"))
        gt_grads = read_safetensors(os.path.join(d, "grads.safetensors"))
        gt_logits = read_safetensors(os.path.join(d, "logits.safetensors"))["logits"]
    cfg = meta["config"]
    B, T = cfg["batch_size"], cfg["block_size"]
    idx = torch.tensor(meta["inputs"]).view(B, T)
    tgt = torch.tensor(meta["targets"]).view(B, T)
    params = {k: v.clone().requires_grad_(True) for k, v in init.items()}
    logits = gpt_forward(params, idx, cfg)
    loss = F.cross_entropy(logits.view(-1, logits.size(-1)), tgt.view(-1))
    loss.backward()
    failures = []
    e = rel_err(gt_logits, logits.detach())
    print(f"logits: max rel err {e:.2e}")
    if e > 1e-4:
        failures.append(f"logits differ: {e:.2e}")
    le = abs(meta["loss"] - loss.item()) / abs(loss.item())
    print(f"loss: greentrain {meta['loss']:.8f} torch {loss.item():.8f} rel err {le:.2e}")
    if le > 1e-5:
        failures.append(f"loss differs: {le:.2e}")
    worst = 0.0
    for name, p in params.items():
        e = rel_err(gt_grads[name], p.grad)
        worst = max(worst, e)
        if e > 1e-4:
            failures.append(f"gradient of {name} differs: {e:.2e}")
    print(f"gradients: {len(params)} tensors, worst max rel err {worst:.2e}")
    # 10 AdamW steps on the same batch, as greentrain did
    failures += compare_losses(meta["losses"], adamw_losses(init, idx, tgt, cfg), 1e-5,
                               "greentrain", "torch")
    if failures:
        print("FAIL:\n  " + "\n  ".join(failures))
        return 1
    print("PASS: greentrain fp32 matches PyTorch", torch.__version__)
    return 0


if __name__ == "__main__":
    sys.exit(main())
