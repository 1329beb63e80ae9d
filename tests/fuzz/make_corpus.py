#!/usr/bin/env python3
"""Seeds for the fuzz targets, from the test data and the examples: writes OUT/<target>/* .

usage: tests/fuzz/make_corpus.py OUT [DATA_DIR]   (DATA_DIR defaults to ../shared/data)
Only small files are taken (the first bytes of big ones), so the corpus stays a few MB.
"""
import json, os, struct, sys
from math import prod
from pathlib import Path

root = Path(__file__).resolve().parents[2]
out = Path(sys.argv[1])
data = Path(sys.argv[2]) if len(sys.argv) > 2 else root.parent / "shared" / "data"
MAX = 64 << 10


def put(target, name, blob):
    d = out / target
    d.mkdir(parents=True, exist_ok=True)
    (d / name).write_bytes(blob if isinstance(blob, bytes) else blob.encode())


def files(pattern):
    for base in (root / "examples", data, root / "tests"):
        if base.exists():
            yield from sorted(base.rglob(pattern))


n = 0
for f in files("config.json"):
    put("config_json", f"c{n}", f.read_bytes()[:MAX]); n += 1
    try:
        qc = json.loads(f.read_text()).get("quantization_config")
        if qc: put("fp8_config", f"q{n}", json.dumps(qc))
    except Exception:
        pass
for f in files("generation_config.json"):
    put("config_json", f"g{n}", f.read_bytes()[:MAX]); n += 1
put("fp8_config", "fp8", '{"quant_method": "fp8", "fmt": "e4m3", "weight_block_size": [128, 128]}')
put("fp8_config", "ct", json.dumps({"quant_method": "compressed-tensors", "format": "float-quantized",
    "config_groups": {"group_0": {"weights": {"type": "float", "num_bits": 8, "strategy": "channel", "symmetric": True}}}}))
for f in files("tokenizer.json"):
    if f.stat().st_size <= 4 * MAX: put("tokenizer_json", f"t{n}", f.read_bytes()); n += 1
for f in files("tokenizer_config.json"):
    put("tokenizer_json", f"tc{n}", f.read_bytes()[:MAX]); n += 1
put("tokenizer_json", "mini", json.dumps({"version": "1.0", "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2},
    "merges": ["a b"]}, "added_tokens": [{"id": 3, "content": "<s>", "special": True}],
    "pre_tokenizer": {"type": "ByteLevel"}, "decoder": {"type": "ByteLevel"}}))
for f in files("adapter_config.json"):
    put("adapter_config", f"a{n}", f.read_bytes()[:MAX]); n += 1
put("adapter_config", "loft", json.dumps({"peft_type": "LORA", "r": 8, "lora_alpha": 16, "target_modules": ["q_proj"],
    "loft": {"format_version": 1, "method": "halo", "rank": 8, "alpha": 16, "targets": ["q_proj"],
             "halo": {"level": 2, "format": "fp8", "backbone": "dense"}}}))
put("trainer_state", "state", json.dumps({"step": 5, "optimizer_steps": 5, "data": {"packer": {"seq": 16,
    "batch_rows": 2, "packing": True, "rows": [[{"ids": [1, 2, 3], "trained": [0, 1, 1]}]], "current": []}}}))
put("trainer_state", "metrics", '{"step": 3, "loss": 2.5, "lr": 0.001}')
for f in list(files("*.jsonl"))[:40]:
    for i, line in enumerate(f.read_bytes().splitlines()[:3]):
        put("record", f"r{n}_{i}", line[:MAX])
    n += 1
for f in list(files("*.json")):
    if f.stat().st_size < MAX and f.name.startswith(("alpaca", "sharegpt", "messages")):
        put("record", f"j{n}", f.read_bytes()); n += 1
put("record", "messages", json.dumps({"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]}))
put("record", "sharegpt", json.dumps({"conversations": [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "yo"}]}))
for f in list(files("*.csv"))[:20]:
    put("csv", f"v{n}", f.read_bytes()[:MAX]); n += 1
put("csv", "quoted", 'q,"a, b","c ""d""",x,y,A\n')


def safetensors(tensors, metadata=None):
    """tensors: [(name, dtype, shape, bytes)] -> a safetensors file."""
    header, blob = ({"__metadata__": metadata} if metadata else {}), b""
    for name, dtype, shape, data in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(blob), len(blob) + len(data)]}
        blob += data
    h = json.dumps(header).encode()
    return struct.pack("<Q", len(h)) + h + blob


# Real headers (names, dtypes, metadata, every tensor of the checkpoint) with each dim cut to at
# most 2, so the data area is a few bytes per tensor: the header parser never reads the data, and
# megabytes of it per input only slowed the fuzzer (and, cut at -max_len, made the seeds invalid).
DTYPE_BYTES = {"F64": 8, "I64": 8, "U64": 8, "F32": 4, "I32": 4, "U32": 4, "F16": 2, "BF16": 2, "I16": 2,
               "U16": 2, "F8_E4M3": 1, "F8_E5M2": 1, "I8": 1, "U8": 1, "BOOL": 1}
for f in list(files("*.safetensors")):
    with open(f, "rb") as fh:
        size = struct.unpack("<Q", fh.read(8))[0]
        if size > MAX: continue
        header = json.loads(fh.read(size))
    meta = header.pop("__metadata__", None)
    cut = lambda shape: [min(d, 2) for d in shape]
    put("safetensors_header", f"s{n}", safetensors(
        [(k, v["dtype"], cut(v["shape"]), bytes(DTYPE_BYTES.get(v["dtype"], 4) * prod(cut(v["shape"]))))
         for k, v in header.items()], meta)); n += 1
put("safetensors_header", "mini", safetensors([("w", "F32", [2, 2], bytes(16))], {"format": "pt"}))


codes = bytes(range(0x30, 0x30 + 24))  # 4 x 6 E4M3 codes
f32 = lambda *v: struct.pack(f"<{len(v)}f", *v)
put("fp8_weights", "block", safetensors([("m.weight", "F8_E4M3", [4, 6], codes),
                                         ("m.weight_scale_inv", "F32", [1, 1], f32(0.5))]))
put("fp8_weights", "block13", safetensors([("m.weight", "F8_E4M3", [4, 6], codes),
                                           ("m.weight_scale_inv", "F32", [4, 2], f32(*[0.25] * 8))]))
put("fp8_weights", "channel", safetensors([("m.weight", "F8_E4M3", [4, 6], codes),
                                           ("m.weight_scale", "F32", [4, 1], f32(1, 2, 3, 4)),
                                           ("m.weight_zero_point", "F8_E4M3", [4, 1], bytes(4))]))
put("fp8_weights", "tensor", safetensors([("m.weight", "F8_E4M3", [4, 6], codes),
                                          ("m.weight_scale", "BF16", [1], b"\x80\x3f"),
                                          ("n.weight", "F32", [2], f32(1, 2))]))


def gguf(kv, tensors, alignment=32):
    """kv: [(key, type, value)], tensors: [(name, ne, ggml_type, nbytes)] -> a GGUF v3 file (the
    layout export/gguf/gguf_writer.h documents; type 9 values are (elem_type, [items]))."""
    fmt = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
    s = lambda b: struct.pack("<Q", len(b)) + b
    val = lambda t, v: s(v.encode()) if t == 8 else struct.pack("<" + fmt[t], v)
    h = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kv))
    for key, t, v in kv:
        h += s(key.encode()) + struct.pack("<I", t)
        if t == 9:
            h += struct.pack("<IQ", v[0], len(v[1])) + b"".join(val(v[0], x) for x in v[1])
        else:
            h += val(t, v)
    blob = b""
    for name, ne, t, n in tensors:
        h += s(name.encode()) + struct.pack(f"<I{len(ne)}QIQ", len(ne), *ne, t, len(blob))
        blob += bytes(n) + bytes(-n % alignment)
    return h + bytes(-len(h) % alignment) + blob


put("gguf", "empty", gguf([], []))
put("gguf", "every_type", gguf(
    [("u8", 0, 200), ("i8", 1, -100), ("u16", 2, 60000), ("i16", 3, -30000), ("u32", 4, 4000000000),
     ("i32", 5, -2000000000), ("f32", 6, 1.5), ("bool", 7, True), ("str", 8, "héllo"), ("u64", 10, 1 << 60),
     ("i64", 11, -(1 << 60)), ("f64", 12, -0.125), ("a.i32", 9, (5, [1, -2, 3])), ("a.f32", 9, (6, [0.5, -1.0])),
     ("a.str", 9, (8, ["a", "", "ccc"])), ("a.bool", 9, (7, [True, False])), ("a.empty", 9, (0, []))],
    [("t.f32", [5, 3], 0, 60), ("t.q8", [32, 2], 8, 68), ("t.f16", [4], 1, 8), ("t.bf16", [2, 1, 1, 2], 30, 8)]))
put("gguf", "align64", gguf([("general.alignment", 4, 64)], [("x", [3], 0, 12), ("y", [3], 0, 12)], 64))
put("gguf", "llama", gguf(
    [("general.architecture", 8, "llama"), ("general.file_type", 4, 1), ("llama.block_count", 4, 1),
     ("tokenizer.ggml.model", 8, "llama"), ("tokenizer.ggml.tokens", 9, (8, ["<unk>", "<s>", "</s>", "a"])),
     ("tokenizer.ggml.scores", 9, (6, [0.0, 0.0, 0.0, -1.0])), ("tokenizer.ggml.token_type", 9, (5, [2, 3, 3, 1])),
     ("general.quantization_version", 4, 2)],
    [("token_embd.weight", [256, 4], 12, 4 * 144), ("blk.0.attn_q.weight", [64, 64], 2, 64 * 36),
     ("output_norm.weight", [256], 0, 1024)]))
for f in sorted((root / "docs" / "recipes").glob("*.yaml")):
    put("recipe", f.name, f.read_bytes()[:MAX])
put("recipe", "accumulate", "micro_batch_size: 4\ngradient_accumulation_steps: 2\nlr: 1e-3\n")
put("recipe", "lists", "datasets:\n  - a.jsonl\n  - {path: b.jsonl, type: sharegpt, weight: 2}\n"
    "target_modules: [q_proj, v_proj]\nlora_target_linear: false\n")
put("recipe", "complex_key", "? [a, b]\n: 1\n")
put("recipe", "two_documents", "lr: 1\n---\nlr: 2\n")
put("recipe", "anchors", "base: &b 4\nmicro_batch_size: *b\n")
print(f"corpus written to {out}")
