#!/usr/bin/env python3
"""Writes a random Llama checkpoint of a given shape (bf16, Hugging Face layout, sharded with an
index) and, optionally, a random PEFT LoRA adapter for it, using only the standard library, so
`loft export` can be measured on a llama-7b-sized model (scripts/dev/bench-export-7b.sh).

The values are a small block of Gaussian bf16 numbers (std 0.02) tiled over each tensor with a
per-tensor rotation: finite, weight-like, and cheap to write (no numpy needed). They exercise
memory and time, not quality.

  python3 scripts/dev/make_random_llama.py --shape llama-7b --out /tmp/l7b [--adapter /tmp/l7b-ad --rank 16]
"""
import argparse
import json
import os
import random
import struct

SHAPES = {
    # hidden, intermediate, layers, heads, kv heads, vocab
    "llama-7b": (4096, 11008, 32, 32, 32, 32000),
    "tiny": (256, 768, 2, 4, 2, 512),
}
BLOCK_VALUES = 1 << 20  # 1 Mi values per tiled block


def bf16_block(rng, std):
    vals = [rng.gauss(0.0, std) for _ in range(BLOCK_VALUES)]
    raw = struct.pack("<%df" % len(vals), *vals)
    # f32 -> bf16 by truncation of the low half (fine for random data)
    return bytes(b for i in range(0, len(raw), 4) for b in raw[i + 2:i + 4])


def f32_block(rng, std):
    vals = [rng.gauss(0.0, std) for _ in range(BLOCK_VALUES)]
    return struct.pack("<%df" % len(vals), *vals)


def write_tiled(f, block, nbytes, rotate):
    rotate %= len(block)
    src = block[rotate:] + block[:rotate]
    while nbytes > 0:
        n = min(nbytes, len(src))
        f.write(src[:n])
        nbytes -= n


def write_safetensors(path, tensors, block, elem):
    """tensors: list of (name, shape, dtype); data tiled from block."""
    header, off = {"__metadata__": {"format": "pt"}}, 0
    for name, shape, dtype in tensors:
        n = elem
        for d in shape:
            n *= d
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [off, off + n]}
        off += n
    text = json.dumps(header, separators=(",", ":"))
    text += " " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text.encode())
        for i, (name, shape, dtype) in enumerate(tensors):
            n = elem
            for d in shape:
                n *= d
            write_tiled(f, block, n, 7919 * (i + 1) * elem)
    return off


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", default="llama-7b", choices=sorted(SHAPES))
    ap.add_argument("--out", required=True)
    ap.add_argument("--adapter", default="")
    ap.add_argument("--rank", type=int, default=16)
    ap.add_argument("--shard-gb", type=float, default=5.0)
    args = ap.parse_args()
    h, ffn, layers, heads, kv, vocab = SHAPES[args.shape]
    hd = h // heads
    rng = random.Random(0)
    os.makedirs(args.out, exist_ok=True)
    cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_act": "silu",
           "hidden_size": h, "intermediate_size": ffn, "num_hidden_layers": layers,
           "num_attention_heads": heads, "num_key_value_heads": kv, "head_dim": hd,
           "vocab_size": vocab, "max_position_embeddings": 4096, "rms_norm_eps": 1e-5,
           "rope_theta": 10000.0, "tie_word_embeddings": False, "attention_bias": False,
           "mlp_bias": False, "bos_token_id": 1, "eos_token_id": 2, "torch_dtype": "bfloat16"}
    json.dump(cfg, open(os.path.join(args.out, "config.json"), "w"), indent=2)
    projs = [("self_attn.q_proj", hd * heads, h), ("self_attn.k_proj", hd * kv, h),
             ("self_attn.v_proj", hd * kv, h), ("self_attn.o_proj", h, hd * heads),
             ("mlp.gate_proj", ffn, h), ("mlp.up_proj", ffn, h), ("mlp.down_proj", h, ffn)]
    tensors = [("model.embed_tokens.weight", (vocab, h), "BF16")]
    for l in range(layers):
        p = "model.layers.%d." % l
        tensors += [(p + "input_layernorm.weight", (h,), "BF16"),
                    (p + "post_attention_layernorm.weight", (h,), "BF16")]
        tensors += [(p + n + ".weight", (o, i), "BF16") for n, o, i in projs]
    tensors += [("model.norm.weight", (h,), "BF16"), ("lm_head.weight", (vocab, h), "BF16")]
    block = bf16_block(rng, 0.02)
    limit = int(args.shard_gb * 1e9)
    shards, cur, size = [], [], 0
    for t in tensors:
        n = 2 * t[1][0] * (t[1][1] if len(t[1]) > 1 else 1)
        if cur and size + n > limit:
            shards.append(cur)
            cur, size = [], 0
        cur.append(t)
        size += n
    shards.append(cur)
    weight_map, total = {}, 0
    for i, s in enumerate(shards):
        name = "model-%05d-of-%05d.safetensors" % (i + 1, len(shards))
        total += write_safetensors(os.path.join(args.out, name), s, block, 2)
        weight_map.update({t[0]: name for t in s})
        print("wrote", name, flush=True)
    json.dump({"metadata": {"total_size": total}, "weight_map": weight_map},
              open(os.path.join(args.out, "model.safetensors.index.json"), "w"), indent=2)
    if args.adapter:
        os.makedirs(args.adapter, exist_ok=True)
        r, ad = args.rank, []
        for l in range(layers):
            for n, o, i in projs:
                m = "base_model.model.model.layers.%d.%s" % (l, n)
                ad += [(m + ".lora_A.weight", (r, i), "F32"), (m + ".lora_B.weight", (o, r), "F32")]
        write_safetensors(os.path.join(args.adapter, "adapter_model.safetensors"), ad,
                          f32_block(rng, 0.01), 4)
        json.dump({"peft_type": "LORA", "task_type": "CAUSAL_LM", "r": r, "lora_alpha": 2 * r,
                   "target_modules": [n.split(".")[1] for n, _, _ in projs], "bias": "none",
                   "lora_dropout": 0.0, "base_model_name_or_path": args.out},
                  open(os.path.join(args.adapter, "adapter_config.json"), "w"), indent=2)
        print("wrote adapter", args.adapter)


if __name__ == "__main__":
    main()
