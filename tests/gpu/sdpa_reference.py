#!/usr/bin/env python3
"""Times PyTorch's scaled_dot_product_attention (causal, bf16) on the shapes of
bench/cuda_kernels_bench, forward and backward, and prints them beside Trident's flash
attention when given the bench's --attention-tsv file.

FLOPs are counted as the bench counts them (FlashAttention's convention): forward
4*B*H*T^2*D/2 for causal, backward 2.5 times that. Each number is the median of 10 timed
calls (CUDA events) after 3 warm-ups.

usage: sdpa_reference.py [TRIDENT_ATTENTION_TSV]
"""
import sys

import torch
import torch.nn.functional as F

SHAPES = [(4, 32, 32, 2048, 64), (8, 16, 16, 2048, 128), (4, 32, 8, 2048, 128)]


def median_ms(fn, warmup=3, reps=10):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(reps):
        start = torch.cuda.Event(enable_timing=True)
        stop = torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    times.sort()
    return times[len(times) // 2]


def sdpa_times(b, h, kv, t, d):
    gen = torch.Generator(device="cuda").manual_seed(0)
    q = torch.randn(b, h, t, d, device="cuda", dtype=torch.bfloat16, generator=gen, requires_grad=True)
    k = torch.randn(b, kv, t, d, device="cuda", dtype=torch.bfloat16, generator=gen, requires_grad=True)
    v = torch.randn(b, kv, t, d, device="cuda", dtype=torch.bfloat16, generator=gen, requires_grad=True)
    gqa = {"enable_gqa": True} if kv != h else {}
    fwd = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True, **gqa)
    out = fwd()
    dout = torch.randn_like(out)
    fwd_ms = median_ms(fwd)

    def bwd():
        q.grad = k.grad = v.grad = None
        out.backward(dout, retain_graph=True)

    bwd_ms = median_ms(bwd)
    flops = 4.0 * b * h * t * t * d / 2.0
    return fwd_ms, bwd_ms, flops / (fwd_ms * 1e9), 2.5 * flops / (bwd_ms * 1e9)


def main():
    ours = {}
    if len(sys.argv) > 1:
        with open(sys.argv[1]) as f:
            next(f)
            for line in f:
                p = line.split("\t")
                ours[tuple(int(x) for x in p[:5])] = (float(p[7]), float(p[8]))
    print(f"\nCausal attention, bf16, {torch.cuda.get_device_name()} (torch {torch.__version__})")
    print(f"{'shape':<26} {'ours fwd':>9} {'sdpa fwd':>9} {'sdpa/ours':>9} "
          f"{'ours bwd':>9} {'sdpa bwd':>9} {'sdpa/ours':>9}   (TFLOP/s)")
    for b, h, kv, t, d in SHAPES:
        fwd_ms, bwd_ms, fwd_tf, bwd_tf = sdpa_times(b, h, kv, t, d)
        name = f"b{b} h{h} kv{kv} t{t} d{d}"
        o = ours.get((b, h, kv, t, d))
        if o:
            print(f"{name:<26} {o[0]:9.1f} {fwd_tf:9.1f} {fwd_tf / o[0]:9.2f} "
                  f"{o[1]:9.1f} {bwd_tf:9.1f} {bwd_tf / o[1]:9.2f}")
        else:
            print(f"{name:<26} {'-':>9} {fwd_tf:9.1f} {'-':>9} {'-':>9} {bwd_tf:9.1f} {'-':>9}")


if __name__ == "__main__":
    main()
