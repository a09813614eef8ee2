#!/usr/bin/env python3
"""A Hugging Face GPT-2 folder in greentrain (train/hf_gpt2.h), and back.

1. transformers makes a tiny randomly initialised GPT2LMHeadModel (no download) and saves it
   with save_pretrained, beside the byte-level BPE vocabulary of tests/engine/data/gpt2-tiny.
2. `greentrain eval FOLDER --data TEXT` gives the validation loss that transformers computes on
   the same tokens (GPT2TokenizerFast's ids, greentrain's validation split and batches).
3. `greentrain train --init-from FOLDER` trains 3 steps from those weights (its tokenizer
   taken from the folder); the run's checkpoint folder loads in transformers as it is
   (GPT2LMHeadModel.from_pretrained and GPT2TokenizerFast.from_pretrained) with the loss
   `greentrain eval` gives for the run.

Usage: hf_gpt2_init.py GREENTRAIN_BINARY   (exit 77 = skipped: transformers not installed)
"""
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile

try:
    import torch
    import torch.nn.functional as F
    import transformers
    from transformers import GPT2Config, GPT2LMHeadModel, GPT2TokenizerFast
except ImportError as e:
    print(f"SKIP: {e}; run scripts/python-venv.sh (it makes build/venv with transformers) "
          "and configure again")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
TINY = os.path.join(HERE, "..", "engine", "data", "gpt2-tiny")
T, B, EVAL_STEPS, VAL_FRACTION = 32, 4, 3, 0.25

TEXT = ("The quick brown fox jumps over the lazy dog. It's a dog's life, isn't it?\n"
        "I'm sure they're right; we've seen it, you'll see.  Numbers: 42 and 3.14\n"
        "Привет, мир! 日本語のテキスト. Emoji 😀 👍🏽 and   spaces\t\ttabs.\n") * 40


def hf_loss(model, ids):
    """greentrain's evaluation (train/data.h eval_batch) on the validation split of ids."""
    n_val = int(len(ids) * VAL_FRACTION)
    val = torch.tensor(ids[len(ids) - n_val:], dtype=torch.long)
    n = (len(val) - 1) // T
    losses = []
    with torch.no_grad():
        for i in range(EVAL_STEPS):
            ks = [(i * B + b) % n for b in range(B)]
            x = torch.stack([val[k * T:(k + 1) * T] for k in ks])
            y = torch.stack([val[k * T + 1:(k + 1) * T + 1] for k in ks])
            logits = model(x).logits
            losses.append(F.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                          y.reshape(-1)).item())
    return sum(losses) / len(losses)


def gt_eval(binary, folder, text_path):
    r = subprocess.run([binary, "eval", folder, "--data", text_path,
                        "--set", f"train.batch_size={B}", "--set", f"train.eval_steps={EVAL_STEPS}",
                        "--set", f"data.val_fraction={VAL_FRACTION}", "--set", "train.threads=2"],
                       capture_output=True, text=True)
    out = r.stdout + r.stderr
    if r.returncode != 0 or "val loss " not in out:
        print(f"FAIL: greentrain eval {folder}: {out}")
        sys.exit(1)
    print(out.strip())
    return float(out.split("val loss ")[1].split()[0])


def check(name, gt, hf):
    print(f"{name}: greentrain {gt:.4f}, transformers {hf:.6f}")
    if abs(gt - round(hf, 4)) > 1.5e-4:
        print(f"FAIL: {name}: the losses differ")
        sys.exit(1)


def main():
    binary = sys.argv[1]
    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as d:
        hf = os.path.join(d, "hf")
        tok = GPT2TokenizerFast(vocab_file=os.path.join(TINY, "vocab.json"),
                                merges_file=os.path.join(TINY, "merges.txt"))
        cfg = GPT2Config(vocab_size=len(tok), n_positions=T, n_embd=32, n_layer=2, n_head=2,
                         resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
        model = GPT2LMHeadModel(cfg)
        # random weights larger than the default 0.02, so that the loss says something
        with torch.no_grad():
            for p in model.parameters():
                p.add_(torch.randn_like(p) * 0.05)
        model.eval()
        model.save_pretrained(hf)
        tok.save_pretrained(hf)
        text_path = os.path.join(d, "text.txt")
        with open(text_path, "w", encoding="utf-8") as f:
            f.write(TEXT)
        ids = tok.encode(TEXT)
        print(f"transformers {transformers.__version__}, torch {torch.__version__}: "
              f"{len(ids)} tokens, vocabulary {len(tok)}")

        check("eval of the Hugging Face folder", gt_eval(binary, hf, text_path),
              hf_loss(model, ids))

        # train --init-from: a few steps, then the checkpoint folder in transformers
        conf = os.path.join(d, "init.toml")
        with open(conf, "w") as f:
            f.write(f"""[train]
batch_size = {B}
max_steps = 3
warmup_steps = 1
learning_rate = 1e-3
eval_interval = 0
eval_steps = {EVAL_STEPS}
threads = 2
[data]
path = "{text_path}"
val_fraction = {VAL_FRACTION}
""")
        run = os.path.join(d, "run")
        r = subprocess.run([binary, "train", conf, "--init-from", hf, "--out", run],
                           capture_output=True, text=True)
        if r.returncode != 0 or "data.tokenizer = gpt2" not in r.stdout + r.stderr:
            print(f"FAIL: train --init-from: {r.stdout}{r.stderr}")
            sys.exit(1)
        trained = gt_eval(binary, run, text_path)
        ckpt = os.path.join(run, "checkpoint")
        back = GPT2LMHeadModel.from_pretrained(ckpt)
        back.eval()
        back_tok = GPT2TokenizerFast.from_pretrained(ckpt)
        if back_tok.encode(TEXT) != ids:
            print("FAIL: the checkpoint's tokenizer files give other ids in transformers")
            sys.exit(1)
        check("greentrain's checkpoint in transformers", trained, hf_loss(back, ids))
        if abs(trained - hf_loss(model, ids)) < 1e-3:
            print("FAIL: training from the folder did not change the loss")
            sys.exit(1)
        print("OK")


if __name__ == "__main__":
    main()
