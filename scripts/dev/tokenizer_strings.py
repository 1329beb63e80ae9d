#!/usr/bin/env python3
"""Writes a JSONL of test strings ({"text": ...} per line) for checking loft's tokenizers against
Hugging Face `tokenizers` (scripts/dev/hf_tokenize.py on a machine that has it): real text from the
shared data sets (GSM8K, MMLU, Alpaca, TinyStories) plus seeded random strings built to stress the
pre-tokenizer (scripts, digits, contractions, whitespace runs, special-token spellings).
Usage: tokenizer_strings.py DATA_DIR N_RANDOM SEED > strings.jsonl"""
import csv, glob, json, random, sys

data, n_random, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rng = random.Random(seed)
out = []
for line in open(f"{data}/gsm8k/train.jsonl", encoding="utf-8").readlines()[:300]:
    d = json.loads(line)
    out += [d["question"], d["answer"], "Question: " + d["question"] + "\nAnswer:"]
for f in sorted(glob.glob(f"{data}/mmlu/test/*.csv"))[:57]:
    rows = list(csv.reader(open(f, encoding="utf-8")))[1:6]
    for r in rows:
        out.append(r[0] + "\nA. " + r[1] + "\nB. " + r[2] + "\nC. " + r[3] + "\nD. " + r[4] + "\nAnswer:")
for d in json.load(open(f"{data}/alpaca/alpaca_small.json", encoding="utf-8"))[:300]:
    out.append(d["instruction"] + ("\n\n" + d["input"] if d["input"] else "") + "\n\n" + d["output"])
out += open(f"{data}/tinystories/tinystories_sample.txt", encoding="utf-8").read().split("<|endoftext|>")

pools = [
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ",
    "0123456789", " ", "  ", "\t", "\n", "\r\n", "\u00a0", "\u3000", "\u200b",
    ".,;:!?'\"()[]{}<>-_=+*/\\|@#$%^&~`", "'s", "'S", "'t", "'re", "'VE", "'m", "'ll", "'D",
    "éèêëàâäôöûüçñßøåæœ", "ΑΒΓαβγδεζηθ", "абвгдежзийклмн", "中文分词测试日本語", "ひらがなカタカナ",
    "한국어문장", "עבריתالعربية", "हिन्दी", "ไทย", "😀👍🏽🇫🇷👨‍👩‍👧", "①②③", "٣٤٥", "ℕℤℚ", "ﬁﬂ", "\u0301\u0308",
    "<|eot_id|>", "<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<s>", "</s>",
    "<unk>", "<|reserved_special_token_5|>", "<|eot_id", "|>",
]
for _ in range(n_random):
    parts = []
    for _ in range(rng.randint(1, 24)):
        p = rng.choice(pools)
        if len(p) > 3 and not p.startswith("<"):
            k = rng.randint(1, 6)
            p = "".join(rng.choice(p) for _ in range(k))
        parts.append(p)
    out.append("".join(parts))
for s in out:
    print(json.dumps({"text": s}, ensure_ascii=False))
