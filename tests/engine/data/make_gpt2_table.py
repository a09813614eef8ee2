#!/usr/bin/env python3
"""Makes the known-encoding table of tests/engine/test_tokenizer.cpp (GPT-2 byte-level BPE).

GPT-2's own vocab.json and merges.txt cannot be downloaded on the build machines, so a small
byte-level BPE vocabulary is trained here with Hugging Face's `tokenizers`
(ByteLevelBPETokenizer: GPT-2's pre-tokenization regex and bytes_to_unicode mapping) and the
encodings of transformers' GPT2TokenizerFast (and, as a cross-check, the slow Python
GPT2Tokenizer, whose code is OpenAI's encoder.py) are recorded. greentrain must reproduce them.

Usage: make_gpt2_table.py OUT_DIR   (writes vocab.json, merges.txt, encodings.json)
Made with tokenizers 0.19.1 and transformers 4.44.2 (scripts/python-venv.sh).
"""
import json
import os
import sys

import tokenizers
import transformers
from tokenizers import ByteLevelBPETokenizer
from transformers import GPT2Tokenizer, GPT2TokenizerFast

CORPUS = [
    "The quick brown fox jumps over the lazy dog. It's a dog's life, isn't it?",
    "I'm sure they're right; we've seen it, you'll see, he'd agree, she's done.",
    "Numbers: 0 1 2 3 42 1999 2024 3.14159 1,000,000 and 10% of $5.",
    "    def main():\n        return 0\n\n\tif x == 1:\n\t\tprint('hi')\n",
    "Привет, мир! Как дела? Всё хорошо.",
    "日本語のテキストと中文的文本。",
    "مرحبا بالعالم",
    "नमस्ते दुनिया",
    "Emoji: 😀 👍🏽 🎉 ❤️ 👨‍👩‍👧",
    "Ünïcödé àccénts: café naïve façade",
    "Lots   of    spaces     here.\r\nWindows line\r\nend.",
    "<|endoftext|>",
] * 20

TEXTS = [
    "Hello world",
    "hello world",
    " leading space",
    "   three leading spaces",
    "trailing spaces   ",
    "multiple   spaces    between     words",
    "\n\n\nthree newlines first",
    "ends with newlines\n\n",
    "tabs\t\tand\r\nCRLF\r\n",
    "mixed \t \n whitespace \n\t run",
    "I'm you're they've we'll she'd it's can't don't",
    "'s 't 're 've 'm 'll 'd",
    "He said: 'stop'. \"Quote\" (paren) [bracket] {brace}",
    "UPPER CASE IT'S I'M",
    "numbers 12345 and 3.14 and 1,000,000",
    "a1b2c3 x86_64 v2.0",
    "Привет, мир!",
    "Как дела? Всё хорошо.",
    "日本語のテキスト",
    "中文的文本。",
    "مرحبا بالعالم",
    "नमस्ते दुनिया",
    "Ελληνικά γράμματα",
    "emoji 😀👍🏽 family 👨‍👩‍👧",
    "❤️🎉",
    "non\u00a0breaking\u00a0space",
    "ideographic\u3000space",
    "combining e\u0301 and precomposed é",
    "café naïve façade",
    "<|endoftext|>",
    "before<|endoftext|>after",
    "two<|endoftext|><|endoftext|>specials",
    "    def main():\n        return 0\n",
    "!!!???...---",
    "",
    " ",
    "\n",
    "a\nb\nc",
    "x \ny",
    "zero\u200bwidth",
    "control\x01\x02chars\x7f",
    "vertical\x0btab form\x0cfeed",
    "next\u0085line and line\u2028separator",
    "file\x1cgroup\x1drecord\x1eunit\x1fseparators",
    "The quick brown fox jumps over the lazy dog.",
]


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(CORPUS, vocab_size=600, min_frequency=2,
                            special_tokens=["<|endoftext|>"])
    bpe.save_model(out)
    fast = GPT2TokenizerFast(vocab_file=os.path.join(out, "vocab.json"),
                             merges_file=os.path.join(out, "merges.txt"))
    slow = GPT2Tokenizer(vocab_file=os.path.join(out, "vocab.json"),
                         merges_file=os.path.join(out, "merges.txt"))
    table = []
    for t in TEXTS:
        ids = fast.encode(t)
        assert ids == slow.encode(t), (t, ids, slow.encode(t))
        back = fast.decode(ids, clean_up_tokenization_spaces=False)
        assert back == t, (t, back)
        table.append({"text": t, "ids": ids})
    with open(os.path.join(out, "encodings.json"), "w", encoding="utf-8") as f:
        made = f"tokenizers {tokenizers.__version__}, transformers {transformers.__version__}"
        f.write('{"made_with": "%s GPT2TokenizerFast",\n "vocab_size": %d,\n "encodings": [\n'
                % (made, fast.vocab_size))
        f.write(",\n".join("  " + json.dumps(e, ensure_ascii=False) for e in table))
        f.write("\n]}\n")
    print(f"{len(table)} encodings, vocabulary {fast.vocab_size}, in {out}")


if __name__ == "__main__":
    main()
