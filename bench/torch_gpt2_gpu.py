#!/usr/bin/env python3
"""GPT-2 training speed and energy in PyTorch on one NVIDIA GPU, the side-by-side of
bench/gpu-check.sh stage 4 (greentrain's GPT-2 124M bf16 run).

The same model as greentrain's GPT (learned positions, pre-LayerNorm, tanh GELU, tied
embeddings, biases; initialisation normal 0.02, residual projections 0.02/sqrt(2 n_layer)),
bf16 autocast, F.scaled_dot_product_attention (causal), fused AdamW (lr 6e-4, betas 0.9/0.95,
weight decay 0.1 on matrices), gradient clipping at 1.0, random tokens. Modes: eager and
torch.compile, one after another in this process; each gets --warmup untimed steps (the
compilation happens there), then --steps timed steps between two synchronisations.

Energy: NVML's total-energy counter of the GPU this process runs on
(nvmlDeviceGetTotalEnergyConsumption, millijoules since the driver loaded; Volta and newer) read
before and after the timed steps, through pynvml where importable, else ctypes on
libnvidia-ml.so.1. Joules per token = counter difference / timed tokens; average watts =
counter difference / timed seconds. Unknown energy is null with the reason.

Writes --out (JSON, rewritten through a temporary name after each mode, so a run cut short
keeps the modes it finished): {"eager": {...}, "compile": {...}, "torch": version, "gpu": name}.
--device cpu (with tiny shapes) only checks the script where there is no GPU; its attention
falls back to an explicit causal softmax where PyTorch has no scaled_dot_product_attention.
"""
import argparse
import ctypes
import json
import math
import os
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, C, nh):
        super().__init__()
        self.nh = nh
        self.ln_1, self.ln_2 = nn.LayerNorm(C), nn.LayerNorm(C)
        self.c_attn, self.attn_proj = nn.Linear(C, 3 * C), nn.Linear(C, C)
        self.c_fc, self.mlp_proj = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)

    def attention(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.nh, C // self.nh).transpose(1, 2) for t in (q, k, v))
        if hasattr(F, "scaled_dot_product_attention"):
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:  # PyTorch < 2.0 (--device cpu checks only)
            a = (q @ k.transpose(-2, -1)) / math.sqrt(k.size(-1))
            mask = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
            y = a.masked_fill(~mask, float("-inf")).softmax(-1) @ v
        return self.attn_proj(y.transpose(1, 2).contiguous().view(B, T, C))

    def forward(self, x):
        x = x + self.attention(self.ln_1(x))
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, L, C, nh, T, V):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(V, C), nn.Embedding(T, C)
        self.h = nn.ModuleList(Block(C, nh) for _ in range(L))
        self.ln_f = nn.LayerNorm(C)
        for name, p in self.named_parameters():
            if name.endswith("bias"):
                nn.init.zeros_(p)
            elif "ln_" not in name:
                std = 0.02 / math.sqrt(2 * L) if name.endswith("proj.weight") else 0.02
                nn.init.normal_(p, 0.0, std)

    def forward(self, idx, targets):
        x = self.wte(idx) + self.wpe(torch.arange(idx.size(1), device=idx.device))
        for b in self.h:
            x = b(x)
        logits = self.ln_f(x) @ self.wte.weight.t()  # tied embedding
        return F.cross_entropy(logits.float().reshape(-1, logits.size(-1)), targets.reshape(-1))


class Nvml:
    """NVML's total-energy counter (mJ) of one GPU; .error says why it is unreadable."""

    def __init__(self, uuid, index):
        self.read, self.error, self.via = None, None, None
        try:
            import pynvml
            pynvml.nvmlInit()
            h = (pynvml.nvmlDeviceGetHandleByUUID(uuid.encode() if isinstance(uuid, str) else uuid)
                 if uuid else pynvml.nvmlDeviceGetHandleByIndex(index))
            pynvml.nvmlDeviceGetTotalEnergyConsumption(h)
            self.read, self.via = (lambda: pynvml.nvmlDeviceGetTotalEnergyConsumption(h)), "pynvml"
            return
        except Exception as e:  # not installed, or no such call: try ctypes
            self.error = f"pynvml: {e}"
        try:
            lib = ctypes.CDLL("libnvidia-ml.so.1")
            if lib.nvmlInit_v2() != 0:
                raise RuntimeError("nvmlInit_v2 failed")
            h = ctypes.c_void_p()
            rc = (lib.nvmlDeviceGetHandleByUUID(uuid.encode(), ctypes.byref(h)) if uuid
                  else lib.nvmlDeviceGetHandleByIndex_v2(index, ctypes.byref(h)))
            if rc != 0:
                raise RuntimeError(f"no NVML handle for GPU {uuid or index} (NVML status {rc})")
            mj = ctypes.c_ulonglong()

            def read():
                st = lib.nvmlDeviceGetTotalEnergyConsumption(h, ctypes.byref(mj))
                if st != 0:
                    raise RuntimeError(f"nvmlDeviceGetTotalEnergyConsumption: NVML status {st}")
                return mj.value
            read()
            self.read, self.via, self.error = read, "ctypes libnvidia-ml.so.1", None
        except Exception as e:
            self.error = (self.error + "; " if self.error else "") + f"ctypes: {e}"


def gpu_identity():
    """(uuid or None, NVML index guess) of torch's current CUDA device."""
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    uuid = getattr(props, "uuid", None)
    if uuid is not None:
        s = str(uuid)
        return (s if s.startswith("GPU-") else "GPU-" + s), None
    vis = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip()
    if vis.startswith("GPU-"):
        return vis, None
    return None, int(vis) if vis.isdigit() else torch.cuda.current_device()


def run_mode(mode, a, nvml, dev, flops_per_token, peak):
    torch.manual_seed(1337)
    model = GPT(a.layers, a.width, a.heads, a.context, a.vocab).to(dev)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    other = [p for p in model.parameters() if p.dim() < 2]
    kw = {"fused": True} if dev.type == "cuda" else {}
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": other, "weight_decay": 0.0}],
                            lr=6e-4, betas=(0.9, 0.95), eps=1e-8, **kw)
    fwd = torch.compile(model) if mode == "compile" else model
    data = torch.randint(0, a.vocab, (8, a.batch, a.context + 1), device=dev)

    def step(i):
        batch = data[i % data.size(0)]
        with torch.autocast(device_type=dev.type, dtype=torch.bfloat16):
            loss = fwd(batch[:, :-1], batch[:, 1:])
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    t0 = time.perf_counter()
    for i in range(a.warmup):
        step(i)
    sync()
    warm_s = time.perf_counter() - t0
    e0 = nvml.read() if nvml and nvml.read else None
    t0 = time.perf_counter()
    for i in range(a.steps):
        loss = step(a.warmup + i)
    sync()
    secs = time.perf_counter() - t0
    e1 = nvml.read() if nvml and nvml.read else None
    tokens = a.steps * a.batch * a.context
    r = {"status": "ok", "mode": mode, "steps": a.steps, "warmup_steps": a.warmup,
         "warmup_s": warm_s, "seconds": secs, "tokens": tokens, "tokens_per_s": tokens / secs,
         "last_loss": float(loss), "flops_per_token": flops_per_token}
    r["mfu_datasheet"] = tokens / secs * flops_per_token / (peak * 1e12) if peak else None
    if e0 is not None and e1 is not None:
        j = (e1 - e0) / 1000.0
        r.update({"energy_j": j, "joules_per_token": j / tokens, "avg_w": j / secs,
                  "energy_source": f"NVML total-energy counter via {nvml.via}"})
    else:
        r.update({"energy_j": None, "joules_per_token": None, "avg_w": None,
                  "energy_unknown_reason": (nvml.error if nvml else "no GPU") or "unreadable"})
    if dev.type == "cuda":
        r["max_memory_allocated_bytes"] = torch.cuda.max_memory_allocated()
    del fwd, model, opt, data
    if dev.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    return r


def write(path, doc):
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(doc, f, indent=2)
        f.write("\n")
    os.replace(tmp, path)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", required=True)
    p.add_argument("--modes", default="eager,compile")
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    p.add_argument("--layers", type=int, default=12)
    p.add_argument("--width", type=int, default=768)
    p.add_argument("--heads", type=int, default=12)
    p.add_argument("--context", type=int, default=1024)
    p.add_argument("--vocab", type=int, default=50304)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--peak-tflops", type=float, default=None, help="datasheet dense bf16 peak")
    a = p.parse_args()
    if a.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("torch_gpt2_gpu.py: PyTorch has no CUDA device here")
    dev = torch.device(a.device)
    if dev.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    # 6N + 6LCT (llm.c's count; greentrain's gpt_flops_per_token): N with the tied embedding once
    C, L, V, T = a.width, a.layers, a.vocab, a.context
    n_params = V * C + T * C + L * (12 * C * C + 13 * C) + 2 * C
    flops_per_token = 6.0 * n_params + 6.0 * L * C * T
    nvml = None
    doc = {"torch": torch.__version__, "device": a.device, "model": vars(a), "num_params": n_params,
           "attention": ("F.scaled_dot_product_attention" if hasattr(F, "scaled_dot_product_attention")
                         else "explicit causal softmax (no scaled_dot_product_attention)")}
    if dev.type == "cuda":
        doc["gpu"] = torch.cuda.get_device_name()
        uuid, index = gpu_identity()
        nvml = Nvml(uuid, index)
        doc["nvml"] = nvml.via or nvml.error
    write(a.out, doc)
    for mode in [m for m in a.modes.split(",") if m]:
        if mode == "compile" and not hasattr(torch, "compile"):
            doc[mode] = {"status": "skipped", "reason": f"torch {torch.__version__} has no torch.compile"}
        else:
            try:
                doc[mode] = run_mode(mode, a, nvml, dev, flops_per_token, a.peak_tflops)
            except Exception as e:  # e.g. out of memory, or a compiler missing for inductor
                doc[mode] = {"status": "failed", "reason": f"{type(e).__name__}: {e}"[:2000]}
        write(a.out, doc)
        r = doc[mode]
        print(f"torch {mode}: {r.get('status')} "
              + (f"{r['tokens_per_s']:.0f} tokens/s, J/token {r['joules_per_token']}"
                 if r.get("status") == "ok" else r.get("reason", "")), flush=True)


if __name__ == "__main__":
    main()
