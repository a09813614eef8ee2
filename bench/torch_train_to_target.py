#!/usr/bin/env python3
"""PyTorch training to a target validation loss, equivalent to `greentrain train CONFIG
--set train.target_loss=X --set train.stop_at_target=true`, for bench/energy_to_target.sh.

Same as greentrain, read from the same TOML configuration: the GPT-2 model (learned
positions, pre-LayerNorm, tanh GELU, tied embeddings; tests/parity/torch_parity.py's
gpt_forward), its initialisation (normal 0.02, residual projections 0.02/sqrt(2 n_layer)),
the character tokenizer (sorted distinct characters), the split (the last val_fraction of
the tokens), the batches (the same splitmix64-shuffled windows as greentrain's BatchSampler,
and the same validation batches as its eval_batch), AdamW with weight decay on matrices
only, gradient clipping, linear warm-up and cosine decay (nanoGPT's get_lr), validation every
eval_interval steps over eval_steps batches. Only the initial weights' random numbers differ.

--precision bf16 runs the forward under CPU bf16 autocast; --compile wraps the loss in
torch.compile (PyTorch 2.x). Writes a JSON summary (steps, tokens, seconds, val_loss,
reached) to --out, and with --run-dir a folder that `greentrain report` reads as it reads a
greentrain run: metrics.jsonl (step, loss, lr, step_time_s, tokens_per_s; val_loss at each
validation), config.toml (the configuration with the overrides, and a [pytorch] table) and
summary.json (no energy: the meter is outside, bench/e2t_report_runs.py adds its figures).
"""
import argparse
import json
import math
import os
import sys
import time
import tomllib

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "tests", "parity"))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch_parity import gpt_forward, make_adamw  # noqa: E402

M64 = (1 << 64) - 1


class SplitMix64:
    """greentrain's splitmix64 (src/train/data.cpp; Steele et al. 2014)."""

    def __init__(self, s):
        self.s = s & M64

    def next(self):
        self.s = (self.s + 0x9E3779B97F4A7C15) & M64
        z = self.s
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
        return z ^ (z >> 31)


class BatchSampler:
    """greentrain's BatchSampler: each epoch a random offset < T, then the non-overlapping
    windows from it in a shuffled order."""

    def __init__(self, tokens, B, T, seed):
        self.tokens, self.B, self.T, self.seed = tokens, B, T, seed
        self.start_epoch(0)

    def start_epoch(self, e):
        self.epoch, self.cursor = e, 0
        g = SplitMix64(self.seed * 0x9E3779B97F4A7C15 + e + 1)
        N, T = len(self.tokens), self.T
        max_off = min(T - 1, N - 1 - T)
        self.offset = g.next() % (max_off + 1) if max_off > 0 else 0
        n = (N - 1 - self.offset) // T
        order = list(range(n))
        for i in range(n - 1, 0, -1):
            j = g.next() % (i + 1)
            order[i], order[j] = order[j], order[i]
        self.order = torch.tensor(order, dtype=torch.long)

    def next(self):
        idx = []
        for _ in range(self.B):
            if self.cursor == len(self.order):
                self.start_epoch(self.epoch + 1)
            idx.append(self.offset + int(self.order[self.cursor]) * self.T)
            self.cursor += 1
        starts = torch.tensor(idx, dtype=torch.long)[:, None] + torch.arange(self.T + 1)
        w = self.tokens[starts]
        return w[:, :-1], w[:, 1:]


def eval_batch(tokens, B, T, i):
    n = (len(tokens) - 1) // T
    starts = (torch.arange(B) + i * B) % n * T
    w = tokens[starts[:, None] + torch.arange(T + 1)]
    return w[:, :-1], w[:, 1:]


def learning_rate_at(c, it):
    warmup, decay = c["warmup_steps"], c.get("lr_decay_steps", 0) or c["max_steps"]
    if it < warmup:
        return c["learning_rate"] * (it + 1) / (warmup + 1)
    if it > decay or decay <= warmup:
        return c["min_lr"]
    ratio = (it - warmup) / (decay - warmup)
    return c["min_lr"] + 0.5 * (1 + math.cos(math.pi * ratio)) * (c["learning_rate"] - c["min_lr"])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", default=os.path.join(here, "..", "configs",
                                                     "shakespeare-char-cpu.toml"))
    ap.add_argument("--data", required=True)
    ap.add_argument("--target", type=float, default=1.95)
    ap.add_argument("--precision", choices=["fp32", "bf16"], default="fp32")
    ap.add_argument("--compile", action="store_true")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--out", required=True)
    ap.add_argument("--eval-interval", type=int,
                    help="validate every N steps (default: the config's train.eval_interval)")
    ap.add_argument("--seed", type=int, help="default: the config's train.seed")
    ap.add_argument("--run-dir", help="also write a run folder for `greentrain report` here")
    a = ap.parse_args()
    with open(a.config, "rb") as f:
        cfg = tomllib.load(f)
    m, c = cfg["model"], cfg["train"]
    if a.eval_interval is not None:
        c["eval_interval"] = a.eval_interval
    if a.seed is not None:
        c["seed"] = a.seed
    val_fraction = cfg.get("data", {}).get("val_fraction", 0.1)
    torch.set_num_threads(a.threads)
    torch.manual_seed(c.get("seed", 1337))
    text = open(a.data, encoding="utf-8").read()
    chars = sorted(set(text))
    stoi = {ch: i for i, ch in enumerate(chars)}
    allt = torch.tensor([stoi[ch] for ch in text], dtype=torch.long)
    n_val = int(len(allt) * val_fraction)
    train, val = allt[: len(allt) - n_val], allt[len(allt) - n_val:]
    C, L, T, V, B = m["n_embd"], m["n_layer"], m["block_size"], len(chars), c["batch_size"]
    fcfg = {"n_embd": C, "n_head": m["n_head"], "n_layer": L}
    proj_std = 0.02 / math.sqrt(2 * L)
    p = {"wte.weight": torch.randn(V, C) * 0.02, "wpe.weight": torch.randn(T, C) * 0.02,
         "ln_f.weight": torch.ones(C), "ln_f.bias": torch.zeros(C)}
    for l in range(L):
        h = f"h.{l}."
        p[h + "ln_1.weight"], p[h + "ln_1.bias"] = torch.ones(C), torch.zeros(C)
        p[h + "ln_2.weight"], p[h + "ln_2.bias"] = torch.ones(C), torch.zeros(C)
        p[h + "attn.c_attn.weight"] = torch.randn(C, 3 * C) * 0.02
        p[h + "attn.c_attn.bias"] = torch.zeros(3 * C)
        p[h + "attn.c_proj.weight"] = torch.randn(C, C) * proj_std
        p[h + "attn.c_proj.bias"] = torch.zeros(C)
        p[h + "mlp.c_fc.weight"] = torch.randn(C, 4 * C) * 0.02
        p[h + "mlp.c_fc.bias"] = torch.zeros(4 * C)
        p[h + "mlp.c_proj.weight"] = torch.randn(4 * C, C) * proj_std
        p[h + "mlp.c_proj.bias"] = torch.zeros(C)
    for t in p.values():
        t.requires_grad_(True)
    opt = make_adamw(p, {"weight_decay": c["weight_decay"], "lr": c["learning_rate"],
                         "beta1": c["beta1"], "beta2": c["beta2"], "eps": c.get("eps", 1e-8)})

    def loss_of(x, y):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.precision == "bf16"):
            logits = gpt_forward(p, x, fcfg)
        return F.cross_entropy(logits.float().view(-1, V), y.reshape(-1))

    if a.compile:
        if not hasattr(torch, "compile"):
            sys.exit(f"--compile needs PyTorch 2.x; this is {torch.__version__}")
        loss_of = torch.compile(loss_of)
    sampler = BatchSampler(train, B, T, c.get("seed", 1337))
    accum = c.get("grad_accum_steps", 1)
    run = RunFolder(a.run_dir, cfg, a) if a.run_dir else None
    t0 = time.time()
    reached, val_loss, step = False, None, 0
    while step < c["max_steps"]:
        lr = learning_rate_at(c, step)
        for g in opt.param_groups:
            g["lr"] = lr
        ts = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        step_loss = 0.0
        for _ in range(accum):
            x, y = sampler.next()
            loss = loss_of(x, y) / accum
            loss.backward()
            step_loss += float(loss)
        if c.get("grad_clip", 0) > 0:
            torch.nn.utils.clip_grad_norm_(list(p.values()), c["grad_clip"])
        opt.step()
        step += 1
        line = {"step": step, "loss": step_loss, "lr": lr,
                "step_time_s": time.perf_counter() - ts}
        line["tokens_per_s"] = B * T * accum / line["step_time_s"]
        if (c["eval_interval"] > 0 and step % c["eval_interval"] == 0) or step == c["max_steps"]:
            with torch.no_grad():
                val_loss = sum(float(loss_of(*eval_batch(val, B, T, i)))
                               for i in range(c["eval_steps"])) / c["eval_steps"]
            print(f"step {step}: val {val_loss:.4f} ({time.time() - t0:.0f} s)", flush=True)
            line["val_loss"] = val_loss
            if val_loss <= a.target:
                reached = True
                line["target_reached"] = a.target
        if run:
            run.log(line)
        if reached:
            break
    out = {"torch": torch.__version__, "precision": a.precision, "compile": a.compile,
           "steps": step, "tokens": step * B * T * accum, "seconds": time.time() - t0,
           "val_loss": val_loss, "target": a.target, "reached": reached}
    with open(a.out, "w") as f:
        json.dump(out, f, indent=1)
    if run:
        run.finish(out, B * T * accum)
    print(json.dumps(out))


def toml_value(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    return json.dumps(str(v))  # a TOML basic string is a JSON string for these values


class RunFolder:
    """A run folder as greentrain writes one (metrics.jsonl, config.toml, summary.json),
    without energy figures; files are written to a temporary name and renamed."""

    def __init__(self, path, cfg, a):
        self.path, self.a = path, a
        os.makedirs(path, exist_ok=True)
        tables = {k: dict(v) for k, v in cfg.items() if isinstance(v, dict)}
        tables.setdefault("train", {})["precision"] = a.precision
        tables["train"]["threads"] = a.threads
        tables["train"]["target_loss"] = a.target
        tables["train"]["stop_at_target"] = True
        tables["pytorch"] = {"version": torch.__version__, "compile": a.compile,
                             "autocast": "bf16" if a.precision == "bf16" else "off"}
        text = "".join(f"[{name}]\n" + "".join(f"{k} = {toml_value(v)}\n" for k, v in t.items())
                       + "\n" for name, t in tables.items())
        self._write("config.toml", text)
        self.metrics = open(os.path.join(path, "metrics.jsonl"), "w")
        self.t0 = time.time()
        self.duration_s = 0.0

    def _write(self, name, text):
        tmp = os.path.join(self.path, name + ".tmp")
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, os.path.join(self.path, name))

    def log(self, line):
        self.duration_s += line["step_time_s"]
        self.metrics.write(json.dumps(line) + "\n")

    def finish(self, out, tokens_per_step):
        self.metrics.close()
        wall = time.time() - self.t0
        s = {"run_dir": self.path, "framework": f"PyTorch {torch.__version__}",
             "step": out["steps"], "tokens": out["tokens"], "val_loss": out["val_loss"],
             "duration_s": self.duration_s, "wall_s": wall,
             "tokens_per_s": out["tokens"] / self.duration_s if self.duration_s else None,
             "device": "cpu", "precision": self.a.precision,
             "compile": self.a.compile, "energy_j": None, "energy_unknown": True,
             "energy_unknown_reason": "PyTorch runs are measured from outside "
                                      "(greentrain measure)"}
        t = {"target_loss": self.a.target, "reached": out["reached"]}
        if out["reached"]:
            t.update(step=out["steps"], tokens=out["tokens"], seconds=out["seconds"],
                     val_loss=out["val_loss"], energy_j=None, stopped_at_target=True,
                     seconds_basis="wall time of the run up to the evaluation that reached "
                                   "the target")
        else:
            t["reason"] = f"validation loss never reached {self.a.target} in {out['steps']} steps"
        s["target"] = t
        self._write("summary.json", json.dumps(s, indent=1) + "\n")


if __name__ == "__main__":
    main()
