#!/usr/bin/env python3
"""Reads a GGUF file loft wrote with llama.cpp's own gguf-py reader and checks it.

Optional: needs `pip install gguf numpy` (and `safetensors` to compare against a model), which
loft itself never needs. Usage:

  scripts/dev/check_gguf.py FILE.gguf                 # list metadata and tensors (gguf-py parses it)
  scripts/dev/check_gguf.py FILE.gguf HF_MODEL_DIR    # also compare every tensor with model.safetensors

The comparison undoes llama.cpp's q/k row permutation and dequantizes with gguf-py, then prints the
largest relative error per tensor (F16/BF16: ~1e-3, Q8_0: ~1e-2 expected).
"""
import json
import sys
from pathlib import Path

try:
    import numpy as np
    from gguf import GGUFReader, GGUFValueType
    from gguf.quants import dequantize
except ImportError:
    sys.exit("check_gguf.py needs the gguf Python package: pip install gguf numpy")


def field_value(field):
    if field.types and field.types[0] == GGUFValueType.ARRAY:
        n = len(field.data)
        return f"[{n} x {field.types[-1].name}]"
    part = field.parts[field.data[0]] if field.data else None
    if field.types and field.types[0] == GGUFValueType.STRING:
        text = bytes(part).decode("utf-8", "replace")
        return repr(text if len(text) < 60 else text[:57] + "...")
    return part.tolist()[0] if part is not None else None


def unpermute(w, n_head):
    rows = w.shape[0]
    return w.reshape(n_head, rows // n_head // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def hf_names(cfg):
    names = {"token_embd.weight": "model.embed_tokens.weight", "output_norm.weight": "model.norm.weight",
             "output.weight": "lm_head.weight"}
    parts = {"attn_norm": "input_layernorm", "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj",
             "attn_v": "self_attn.v_proj", "attn_output": "self_attn.o_proj", "ffn_norm": "post_attention_layernorm",
             "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj"}
    for layer in range(cfg["num_hidden_layers"]):
        for g, h in parts.items():
            names[f"blk.{layer}.{g}.weight"] = f"model.layers.{layer}.{h}.weight"
    return names


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    reader = GGUFReader(sys.argv[1])
    for name, field in reader.fields.items():
        if not name.startswith("GGUF."):
            print(f"{name} = {field_value(field)}")
    for t in reader.tensors:
        print(f"tensor {t.name} {t.tensor_type.name} {list(t.shape)}")
    if len(sys.argv) == 2:
        return
    from safetensors.numpy import load_file

    model = Path(sys.argv[2])
    cfg = json.loads((model / "config.json").read_text())
    weights = {}
    for f in sorted(model.glob("*.safetensors")):
        weights.update(load_file(f))
    heads, kv_heads = cfg["num_attention_heads"], cfg.get("num_key_value_heads", cfg["num_attention_heads"])
    names = hf_names(cfg)
    worst = 0.0
    for t in reader.tensors:
        if t.name not in names:
            continue
        ref = weights[names[t.name]].astype(np.float32)
        got = dequantize(t.data, t.tensor_type).reshape(ref.shape).astype(np.float32)
        if ".attn_q." in t.name:
            got = unpermute(got, heads)
        elif ".attn_k." in t.name:
            got = unpermute(got, kv_heads)
        err = float(np.abs(got - ref).max() / max(float(np.abs(ref).max()), 1e-30))
        worst = max(worst, err)
        print(f"{t.name}: max relative error {err:.2e}")
    print(f"worst: {worst:.2e}")


if __name__ == "__main__":
    main()
