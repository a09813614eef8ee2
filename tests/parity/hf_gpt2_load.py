#!/usr/bin/env python3
"""A greentrain checkpoint loads in Hugging Face's GPT-2 (model/gpt.h says so).

Trains a small GPT with the greentrain program on token files, then loads its
checkpoint/model.safetensors with transformers' GPT2LMHeadModel.from_pretrained (a config.json
beside it: GELU tanh approximation "gelu_new", LayerNorm eps 1e-5, no dropout) and computes the
validation loss over the same batches as greentrain's evaluation (train/data.h eval_batch).
The two losses must agree within fp32 tolerance (1e-5 relative). Then the other way: the file
GPT2LMHeadModel.save_pretrained writes ("transformer."-prefixed names) is read back by
`greentrain eval` with the same loss.

Usage: hf_gpt2_load.py GREENTRAIN_BINARY
(exit 77 = skipped: transformers or PyTorch not installed; scripts/python-venv.sh makes a
build/venv that has them)
"""
import json
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import torch
    import torch.nn.functional as F
    import transformers
    from transformers import GPT2LMHeadModel
except ImportError as e:
    print(f"SKIP: {e}; run scripts/python-venv.sh (it makes build/venv with transformers) "
          "and configure again")
    sys.exit(77)

V, T, B, LAYERS, HEADS, WIDTH, EVAL_STEPS = 50, 16, 4, 2, 2, 32, 3


def tokens(n, seed):
    rng = np.random.default_rng(seed)
    # a learnable pattern with noise, so training moves the weights
    base = (np.arange(n) * 7) % V
    noise = rng.integers(0, V, n)
    return np.where(rng.random(n) < 0.2, noise, base).astype(np.uint16)


def main():
    binary = sys.argv[1]
    with tempfile.TemporaryDirectory() as d:
        train, val = tokens(4000, 1), tokens(600, 2)
        train.tofile(os.path.join(d, "train.bin"))
        val.tofile(os.path.join(d, "val.bin"))
        cfg = os.path.join(d, "hf.toml")
        with open(cfg, "w") as f:
            f.write(f"""[model]
n_layer = {LAYERS}
n_head = {HEADS}
n_embd = {WIDTH}
block_size = {T}
vocab_size = {V}
[train]
batch_size = {B}
max_steps = 30
warmup_steps = 3
eval_interval = 0
eval_steps = {EVAL_STEPS}
threads = 2
[data]
format = "nanogpt"
path = "{d}/train.bin"
val_path = "{d}/val.bin"
""")
        run = os.path.join(d, "run")
        r = subprocess.run([binary, "train", cfg, "--out", run], capture_output=True, text=True)
        if r.returncode != 0:
            print(r.stdout, r.stderr)
            sys.exit(1)
        last = [json.loads(line) for line in open(os.path.join(run, "metrics.jsonl"))][-1]
        gt_loss = last["val_loss"]

        hf_dir = os.path.join(d, "hf")
        os.makedirs(hf_dir)
        os.symlink(os.path.join(run, "checkpoint", "model.safetensors"),
                   os.path.join(hf_dir, "model.safetensors"))
        with open(os.path.join(hf_dir, "config.json"), "w") as f:
            json.dump({"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"],
                       "vocab_size": V, "n_positions": T, "n_embd": WIDTH, "n_layer": LAYERS,
                       "n_head": HEADS, "activation_function": "gelu_new",
                       "layer_norm_epsilon": 1e-5, "resid_pdrop": 0.0, "embd_pdrop": 0.0,
                       "attn_pdrop": 0.0, "tie_word_embeddings": True}, f)
        model, info = GPT2LMHeadModel.from_pretrained(hf_dir, output_loading_info=True)
        model.eval()
        # every tensor of the checkpoint was used and every weight came from it (the tied
        # lm_head is wte; the causal-mask buffers are not weights)
        missing = [k for k in info["missing_keys"]
                   if k != "lm_head.weight" and not k.endswith((".attn.bias", ".attn.masked_bias"))]
        if missing or info["unexpected_keys"] or info["mismatched_keys"]:
            print(f"FAIL: loading info {info}")
            sys.exit(1)
        if not torch.equal(model.lm_head.weight, model.transformer.wte.weight):
            print("FAIL: lm_head is not tied to wte")
            sys.exit(1)

        vt = torch.from_numpy(val.astype(np.int64))
        n = (len(vt) - 1) // T
        losses = []
        with torch.no_grad():
            for i in range(EVAL_STEPS):
                ks = [(i * B + b) % n for b in range(B)]
                x = torch.stack([vt[k * T:(k + 1) * T] for k in ks])
                y = torch.stack([vt[k * T + 1:(k + 1) * T + 1] for k in ks])
                logits = model(x).logits
                losses.append(F.cross_entropy(logits.reshape(-1, V), y.reshape(-1)).item())
        hf_loss = sum(losses) / len(losses)
        rel = abs(hf_loss - gt_loss) / abs(gt_loss)
        print(f"transformers {transformers.__version__}, torch {torch.__version__}: "
              f"validation loss greentrain {gt_loss:.7f}, GPT2LMHeadModel {hf_loss:.7f}, "
              f"relative difference {rel:.2e}")
        if rel > 1e-5:
            print("FAIL: the losses differ by more than fp32 tolerance (1e-5 relative)")
            sys.exit(1)

        # and back: what GPT2LMHeadModel.save_pretrained writes ("transformer."-prefixed names,
        # the tied lm_head left out) is read by greentrain eval, with the same loss
        saved = os.path.join(d, "saved")
        model.save_pretrained(saved)
        ckpt = os.path.join(run, "checkpoint", "model.safetensors")
        os.remove(ckpt)
        os.rename(os.path.join(saved, "model.safetensors"), ckpt)
        # a file put there on purpose: its checksum record goes too (else: refused as damaged)
        state_path = os.path.join(run, "checkpoint", "state.json")
        with open(state_path) as f:
            state = json.load(f)
        state.get("files", {}).pop("model.safetensors", None)
        with open(state_path, "w") as f:
            json.dump(state, f, indent=2)
        e = subprocess.run([binary, "eval", run], capture_output=True, text=True)
        out = e.stdout + e.stderr
        if e.returncode != 0 or "prefix 'transformer.'" not in out:
            print(f"FAIL: greentrain eval of the save_pretrained file: {out}")
            sys.exit(1)
        back = float(out.split("val loss ")[1].split()[0])
        print(f"greentrain eval of GPT2LMHeadModel.save_pretrained's file: val loss {back:.4f}")
        if abs(back - round(gt_loss, 4)) > 1.5e-4:
            print("FAIL: the loss differs")
            sys.exit(1)
        print("OK")


if __name__ == "__main__":
    main()
