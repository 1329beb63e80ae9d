#!/usr/bin/env python3
"""Reference values for the Llama-family architectures loft learns next (issue 28): tiny random
Qwen2, Qwen3 and Mistral checkpoints written by transformers, and what transformers + PEFT compute
on them in fp32 with eager attention, in the format of ../shared/data/golden (tests/common/golden.h
reads it; ../shared/data/README.md describes it).

Per model NAME, under OUT_DIR:
  models/NAME/                  config.json + model.safetensors (transformers' save_pretrained)
  golden/golden_NAME.safetensors  input_ids, labels, init/<peft name>, logits, loss, grad/<name>,
                                  step1/<name>, step3/<name>, losses [3], grad_norms_before_clip [3]
  golden/adapter_NAME/          the initial adapter as PEFT saves it
  reference/NAME_greedy.json    greedy tokens of the base model from two prompts
The models differ from Llama exactly where the issue says: Qwen2's q/k/v bias and rope_theta 1e6
(tied and untied embeddings), Qwen3's per-head q/k RMSNorm and head_dim 32 with hidden 64 and 4
heads (q is 128 wide), Mistral's sliding window (16 keys, shorter than the 64-token rows). Biases
and norm weights are drawn at random, not left at transformers' zeros and ones, so that a wrong
bias or norm shows in the logits.
Runs on a CPU (torch, transformers 5, peft): python3 make_family_references.py OUT_DIR [NAME ...]
"""
import json
import os
import sys

import torch
from peft import LoraConfig, get_peft_model
from safetensors.torch import save_file
from transformers import AutoModelForCausalLM, MistralConfig, Qwen2Config, Qwen3Config

COMMON = dict(vocab_size=512, hidden_size=64, intermediate_size=172, num_hidden_layers=2, num_attention_heads=4,
              num_key_value_heads=2, max_position_embeddings=256, rms_norm_eps=1e-6, bos_token_id=1, eos_token_id=2)
MODELS = {
    "qwen2-tiny-tied": lambda: Qwen2Config(**COMMON, rope_theta=1e6, tie_word_embeddings=True),
    "qwen2-tiny": lambda: Qwen2Config(**COMMON, rope_theta=1e6, tie_word_embeddings=False),
    "qwen3-tiny": lambda: Qwen3Config(**COMMON, head_dim=32, rope_theta=1e6, tie_word_embeddings=True),
    "mistral-tiny": lambda: MistralConfig(**COMMON, sliding_window=16, rope_theta=1e4, tie_word_embeddings=False),
}
TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
T = 64  # tokens per row: four sliding windows


def randomize_biases_and_norms(model, gen):
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(".bias"):
                p.copy_(torch.randn(p.shape, generator=gen) * 0.1)
            elif "norm" in name:  # RMSNorm weights, q_norm/k_norm included
                p.copy_(1 + torch.randn(p.shape, generator=gen) * 0.1)


def batch(vocab):
    gen = torch.Generator().manual_seed(99)
    ids = torch.randint(3, vocab, (2, T), generator=gen)
    labels = ids.clone()
    labels[0, :10] = -100
    labels[1, -5:] = -100
    return ids, labels


def make(name, out):
    torch.manual_seed(1)
    cfg = MODELS[name]()
    model = AutoModelForCausalLM.from_config(cfg, attn_implementation="eager", dtype=torch.float32)
    randomize_biases_and_norms(model, torch.Generator().manual_seed(7))
    model.eval()
    model_dir = os.path.join(out, "models", name)
    model.save_pretrained(model_dir, safe_serialization=True)

    greedy = {}
    for i, prompt in enumerate([[1, 17, 42, 99, 256], [1] + list(range(100, 140))]):
        with torch.no_grad():
            g = model.generate(torch.tensor([prompt]), max_new_tokens=24, do_sample=False, eos_token_id=None,
                               pad_token_id=0)
        greedy[f"prompt{i}"] = {"prompt": prompt, "tokens": g[0, len(prompt):].tolist()}
    os.makedirs(os.path.join(out, "reference"), exist_ok=True)
    with open(os.path.join(out, "reference", f"{name}_greedy.json"), "w") as f:
        json.dump(greedy, f, indent=1)

    peft_model = get_peft_model(model, LoraConfig(r=8, lora_alpha=16, target_modules=TARGETS, lora_dropout=0.0))
    gen = torch.Generator().manual_seed(1234)
    lora = {n: p for n, p in peft_model.named_parameters() if "lora_" in n}
    with torch.no_grad():
        for p in lora.values():
            p.copy_(torch.randn(p.shape, generator=gen) * 0.05)
    peft_model.save_pretrained(os.path.join(out, "golden", f"adapter_{name}"))

    ids, labels = batch(cfg.vocab_size)
    tensors = {"input_ids": ids.to(torch.int64), "labels": labels.to(torch.int64)}
    tensors.update({f"init/{n}": p.detach().clone() for n, p in lora.items()})
    peft_model.train()
    opt = torch.optim.AdamW(lora.values(), lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0)
    losses, norms = [], []
    for step in range(1, 4):
        opt.zero_grad()
        outp = peft_model(input_ids=ids, labels=labels)
        outp.loss.backward()
        if step == 1:
            tensors["logits"] = outp.logits.detach().clone()
            tensors["loss"] = outp.loss.detach().clone().reshape(1)
            tensors.update({f"grad/{n}": p.grad.detach().clone() for n, p in lora.items()})
        norms.append(float(torch.nn.utils.clip_grad_norm_(lora.values(), 1.0)))
        losses.append(float(outp.loss))
        opt.step()
        if step in (1, 3):
            tensors.update({f"step{step}/{n}": p.detach().clone() for n, p in lora.items()})
    tensors["losses"] = torch.tensor(losses, dtype=torch.float32)
    tensors["grad_norms_before_clip"] = torch.tensor(norms, dtype=torch.float32)
    save_file({k: v.contiguous() for k, v in tensors.items()},
              os.path.join(out, "golden", f"golden_{name}.safetensors"))
    print(f"{name}: losses {losses}, greedy {greedy['prompt0']['tokens'][:8]}...", flush=True)


def main():
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    out = sys.argv[1]
    for name in sys.argv[2:] or MODELS:
        make(name, out)


if __name__ == "__main__":
    main()
