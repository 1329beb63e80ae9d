#!/usr/bin/env python3
"""FlashAttention-2's speed on this GPU, for loft's attention rows to be read against.

Times PyTorch's SDPA with only the flash backend (FlashAttention-2's kernels) forward and backward,
causal, bf16, at the shapes given as BATCHxSEQ, with loft's flop convention (engine/ops/cases:
forward 2·B·Hq·S²·D for the causal half, backward 2.5x). GQA: K and V are expanded to Hq heads
before timing (the flash backend takes equal head counts; the expansion is not timed, and FA2's own
GQA does the same math). Prints one line per shape and pass:
  sdpa_flash attention b=4 s=4096 hq=32 hkv=8 hd=128  <us/call>  <TFLOP/s>
Usage: attention_sdpa.py [--hq 32 --hkv 8 --hd 128 --repeats 20] 32x512 8x2048 4x4096 1x16384
"""
import argparse

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel


def time_us(fn, repeats):
    fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(repeats):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) * 1e3 / repeats


def main():
    p = argparse.ArgumentParser()
    p.add_argument("shapes", nargs="+")
    p.add_argument("--hq", type=int, default=32)
    p.add_argument("--hkv", type=int, default=8)
    p.add_argument("--hd", type=int, default=128)
    p.add_argument("--repeats", type=int, default=20)
    a = p.parse_args()
    print(f"sdpa_flash on {torch.cuda.get_device_name()} (torch {torch.__version__})")
    for shape in a.shapes:
        b, s = (int(x) for x in shape.split("x"))
        g = torch.Generator(device="cuda").manual_seed(1)
        q = torch.randn(b, a.hq, s, a.hd, device="cuda", dtype=torch.bfloat16, generator=g, requires_grad=True)
        kv = [torch.randn(b, a.hkv, s, a.hd, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(2)]
        k, v = (t.repeat_interleave(a.hq // a.hkv, dim=1).requires_grad_() for t in kv)
        dout = torch.randn(b, a.hq, s, a.hd, device="cuda", dtype=torch.bfloat16, generator=g)
        flops = 2.0 * b * a.hq * s * s * a.hd
        name = f"attention b={b} s={s} hq={a.hq} hkv={a.hkv} hd={a.hd}"
        with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
            fwd = time_us(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True), a.repeats)
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            bwd = time_us(lambda: torch.autograd.grad(out, (q, k, v), dout, retain_graph=True), a.repeats)
        print(f"sdpa_flash {name:<48} {fwd:10.1f} {flops / fwd / 1e6:10.1f}")
        print(f"sdpa_flash {name.replace('attention', 'attention_backward'):<48} {bwd:10.1f} "
              f"{2.5 * flops / bwd / 1e6:10.1f}")


if __name__ == "__main__":
    main()
