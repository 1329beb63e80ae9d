#!/usr/bin/env python3
"""Reference ids from Hugging Face for loft's tokenizer checks (run where `tokenizers` and
`transformers` are installed, e.g. the GPU machine). For each input line {"text": ...} writes
{"ids": encode(text, add_special_tokens=False), "ids_special": transformers' default encoding,
 "decoded": decode(ids)} — the same fields `loft tokenize --jsonl` gives without and with
--add-special, and its --decode.
Usage: hf_tokenize.py TOKENIZER_DIR < strings.jsonl > reference.jsonl"""
import json, sys
from tokenizers import Tokenizer
from transformers import AutoTokenizer

folder = sys.argv[1]
raw = Tokenizer.from_file(f"{folder}/tokenizer.json")
fast = AutoTokenizer.from_pretrained(folder, use_fast=True)
for line in sys.stdin:
    text = json.loads(line)["text"]
    ids = raw.encode(text, add_special_tokens=False).ids
    print(json.dumps({"ids": ids, "ids_special": fast(text)["input_ids"],
                      "decoded": raw.decode(ids, skip_special_tokens=False)}, ensure_ascii=False))
