#!/usr/bin/env python3
"""Derive Trident hardware profiles (format trident.profile/1).

Every table entry is computed from a small, physically motivated model
(roofline + tile/wave quantisation for GEMM, a tiled FlashAttention-2 cost
model for attention, launch + bandwidth for memory-bound kernels, and an
alpha-beta ring/tree model for NCCL collectives).  Each model has one or two
free efficiency constants, which are anchored on *published* vendor
specifications and *published* kernel / nccl-tests micro-benchmark figures
(listed per device in ANCHORS / SOURCES below).  Nothing here is fitted to
end-to-end training throughput.

Standard library only.  Usage:

    python3 profiles/tools/derive_profiles.py [--out-dir profiles/devices]
"""

import argparse
import json
import math
import os
import sys

import gemm_measurements as gm

FORMAT = "trident.profile/1"
GENERATED_BY = "profiles/tools/derive_profiles.py"
DATE = "2026-11-30"
MIB = 1024 * 1024

# --------------------------------------------------------------------------
# Grids (the C++ loader interpolates in log space and needs full grids).
# --------------------------------------------------------------------------
GEMM_DIMS = [2 ** i for i in range(7, 18)]            # 128 .. 131072
ATTN_BH = [2 ** i for i in range(0, 13)]              # 1 .. 4096
ATTN_SEQ = [2 ** i for i in range(7, 18)]             # 128 .. 131072
ATTN_HD = [64, 128]
ATTN_CAUSAL = [0, 1]
MEM_BYTES = [2 ** i for i in range(12, 39)]           # 4 KiB .. 256 GiB
COLL_BYTES = [2 ** i for i in range(2, 35)]           # 4 B .. 16 GiB
NVLINK_GROUPS = [2, 4, 8]
IB_GROUPS = [2 ** i for i in range(1, 11)]            # 2 .. 1024
# Grouped GEMMs (MoE experts): groups x m x n x k. m and k go down to 16 tokens per expert
# (k is the token dimension of the weight-gradient GEMM); n is a weight dimension.
GROUPED_GROUPS = [2 ** i for i in range(1, 9)]        # 2 .. 256
GROUPED_MK = [2 ** i for i in range(4, 15)]           # 16 .. 16384
GROUPED_N = [2 ** i for i in range(8, 15)]            # 256 .. 16384
COLLECTIVES = ["all_reduce", "all_gather", "reduce_scatter", "all_to_all",
               "broadcast", "send_recv"]

# Memory-bound kernels: fraction of HBM bandwidth achieved at large sizes.
# "bytes" = total bytes read + written by the kernel.
MEM_KERNEL_EFF = {
    "layernorm": 0.85,               # two reductions per row, fused affine
    "rmsnorm": 0.87,                 # one reduction per row
    "gelu": 0.88,                    # pure streaming elementwise
    "swiglu": 0.88,                  # pure streaming elementwise (2 in, 1 out)
    "softmax_cross_entropy": 0.80,   # row max/sum reductions over the vocab
    "adamw": 0.75,                   # multi-tensor apply: many small tensors,
                                     # fp32 master/m/v streams, chunked launches
    "elementwise": 0.90,             # copy/add/scale, closest to STREAM
}
MEM_LAUNCH_S = 3.0e-6                # kernel launch + tail of one small kernel

# --------------------------------------------------------------------------
# Per-device anchors.  Each number is either a vendor specification or a
# published micro-benchmark figure; see SOURCES for where it comes from.
# --------------------------------------------------------------------------
SRC_A100_SPEC = ("NVIDIA A100 Tensor Core GPU datasheet / architecture whitepaper: "
                 "SXM4 80GB, 108 SMs, 312 TFLOP/s dense BF16/FP16 tensor, 19.5 TFLOP/s FP32, "
                 "HBM2e 2,039 GB/s")
SRC_H100_SPEC = ("NVIDIA H100 Tensor Core GPU datasheet / Hopper architecture in-depth blog: "
                 "SXM5 80GB, 132 SMs, 989 TFLOP/s dense BF16/FP16 tensor, 67 TFLOP/s FP32, "
                 "HBM3 3.35 TB/s")
SRC_H200_SPEC = ("NVIDIA H200 Tensor Core GPU datasheet: SXM 141GB HBM3e 4.8 TB/s, "
                 "same GH100 compute as H100 SXM (132 SMs, 989 TFLOP/s dense BF16, 67 TFLOP/s FP32)")
SRC_MAMF = ("S. Bekman, Machine Learning Engineering Open Book, compute/accelerator, "
            "'Maximum Achievable Matmul FLOPS comparison table' (github.com/stas00/ml-engineering): "
            "BF16 matmul MAMF A100 SXM 271.2 TFLOP/s (86.9% of 312), H100 SXM 794.5 TFLOP/s "
            "(80.3% of 989), GH200 828.6 TFLOP/s (83.6%)")
SRC_FA2 = ("T. Dao, 'FlashAttention-2: Faster Attention with Better Parallelism and Work "
           "Partitioning', arXiv:2307.08691 (ICLR 2024): A100 forward up to ~73% and backward up "
           "to ~63% of 312 TFLOP/s (head dim 128, long sequences), lower for head dim 64 and short "
           "sequences; H100 FA2 fwd+bwd up to ~335 TFLOP/s; FLOP convention 4*b*h*s^2*d "
           "(halved when causal), backward = 2.5x forward")
SRC_FA3 = ("J. Shah et al., 'FlashAttention-3: Fast and Accurate Attention with Asynchrony and "
           "Low-precision', arXiv:2407.08608: FlashAttention-2 baseline on H100 SXM5 BF16 "
           "(~325-370 TFLOP/s forward at head dim 128, long sequences). Profiles model "
           "FA2-class kernels, NOT FA3")
SRC_NCCL_H100_NVL = ("NVIDIA/nccl-tests issue #212 (S. Jeaugey, NVIDIA): H100 NVLink4 450 GB/s line "
                     "rate, ~370 GB/s effective NCCL busbw for ring (non-NVLS) collectives; NVLS "
                     "all_reduce ~480 GB/s not modelled")
SRC_NCCL_A100_NVL = ("NVIDIA/nccl-tests issues #175 and #149: 8x A100-SXM4 NVSwitch all_reduce_perf "
                     "busbw ~200-233 GB/s (232.5 GB/s reported on a single HGX A100 node)")
SRC_NCCL_NDR = ("NVIDIA/nccl-tests issues #290 and #267 (D. Addison, NVIDIA): ConnectX-7 NDR 400 Gb/s "
                "should reach 46-48(-49) GB/s busbw per NIC; alltoall cannot aggregate NICs")
SRC_NCCL_HDR = ("InfiniBand HDR 200 Gb/s = 25 GB/s line rate per ConnectX-6 NIC; nccl-tests issue #119 "
                "(4x HDR per 8x A100: ~96 GB/s peak node busbw, i.e. ~24 GB/s per NIC)")
SRC_NCCL_A2A = ("NVIDIA/nccl issue #2169: 4x H100 NVLink alltoall_perf busbw ~335-338 GB/s (~0.9x of "
                "the ~370 GB/s ring busbw)")
SRC_NCCL_TREE = ("NCCL 2.4 double binary trees (NVIDIA developer blog 'Massively Scale Your Deep "
                 "Learning Training with NCCL 2.4'): logarithmic all_reduce latency at scale; NCCL "
                 "picks tree for small messages, ring for large")
SRC_FP8_GEMM = ("cuBLASLt FP8 GEMM cross-check report (gitea.d-robotics.cc/han.zhao/test_gpu_scripts, "
                "reports_cublaslt_fp8_crosscheck_20260524.md): E4M3 inputs, BF16 output, FP32 "
                "accumulate, TN layout, 8192^3, two 8-GPU Hopper SXM nodes: 1,599-1,630 TFLOP/s per "
                "GPU, mean 1,608.6 and 1,613.7 (81.3-81.5% of the 1,979 TFLOP/s dense FP8 peak; "
                "PyTorch _scaled_mm reached ~1,175 on the same GPUs)")
SRC_FP8_SPEC = ("NVIDIA H100/H200 datasheets: 1,979 TFLOP/s dense FP8 tensor (3,958 with sparsity), "
                "twice the dense BF16 rate")
SRC_GROUPED = ("Grouped-GEMM micro-benchmarks (H100 SXM unless said; TFLOP/s = 2*sum(m)nk/time): "
               "TransformerEngine PR #2045 (github.com/NVIDIA/TransformerEngine/pull/2045, TE 2.7, "
               "CUDA 12.9, BF16, m per group, host-timed incl. launch) groups x m x n x k = "
               "8x4096x768x2048: 627.9 multi-stream cuBLAS / 650.6 CUTLASS grouped; 16x2048x768x2048: "
               "553.9 / 636.9. TE runs GroupedLinear as one cuBLAS GEMM per group over "
               "num_compute_streams = 4 streams (transformer_engine/common/util/multi_stream.cpp; "
               "multi_stream_cublas_gemm in common/gemm/cublaslt_gemm.cu). Checks: Knarf04/"
               "grouped_gemm run.log (tgale96/grouped_gemm PR #37), Qwen3-30B up_proj "
               "128x512x1536x2048 fwd+bwd: cuBLAS loop 388, CUTLASS SM90 cooperative 482; pytorch/ao "
               "PR #2490 torch._grouped_mm 16 experts x ~512 rows, n 8192 k 5120: ~522, n 5120 k 8192: "
               "~547; DeepGEMM README (H800, FP8 1x128/128x128 scaling) contiguous 4x8192x4096x7168: "
               "1297, 4x8192x7168x2048: 1099, masked 2x512x4096x7168: 1040, 4x256x4096x7168: 932, "
               "4x256x7168x2048: 815")
SRC_DEEPGEMM = ("DeepSeek-AI, DeepGEMM (github.com/deepseek-ai/DeepGEMM, Feb 2025): FP8 GEMMs with "
                "fine-grained (1x128 activation, 128x128 weight) scaling and CUDA-core promotion, "
                "'1350+ FP8 TFLOPS' on Hopper (H800: H100 compute) for dense shapes; the "
                "blockwise recipe is priced at 1350 / 1608.6 = 0.84 of the tensor-scaled table")
SRC_H800_SPEC = ("NVIDIA H800 SXM5 (the export part of GH100): the H100 SXM5's compute and HBM3 "
                 "(132 SMs, 989 TFLOP/s dense BF16, 1,979 dense FP8, 3.35 TB/s) with NVLink cut to "
                 "400 GB/s (H100: 900 GB/s)")
SRC_DEEPSEEK_V3_NET = ("DeepSeek-AI, 'DeepSeek-V3 Technical Report', arXiv:2412.19437, sec. 3.2.2: on "
                       "their H800 cluster 'NVLink offers a bandwidth of 160 GB/s, roughly 3.2 times "
                       "that of IB (50 GB/s)'; nodes of 8 H800 with 8 IB NICs (sec. 3.1)")
SRC_NVSMI = ("nvidia-smi 'FB Memory Usage Total': A100-SXM4-80GB 81920 MiB, H100 80GB HBM3 81559 MiB, "
             "H200 143771 MiB")

SRC_COMM_SMS = ("DeepSeek-AI, 'DeepSeek-V3 Technical Report', arXiv:2412.19437, sec. 3.2.2: 'only "
                "20 SMs' (of the H800's 132) run their all-to-all kernels at full IB and NVLink "
                "bandwidth. device.communication_sms = 20 on every profile: the SMs a bandwidth-"
                "bound collective kernel occupies, i.e. the compute an overlapped collective takes")
# What an overlapped collective takes from the compute it shares the GPU with (SRC_COMM_SMS):
# the device's default, for a fabric that does not say.
COMMUNICATION_SMS = 20

SRC_NCCL_SMS = ("NCCL runs one CTA per channel, alone on its SM (NVIDIA/nccl issue #689, S. "
                "Jeaugey: 'NCCL CTAs won't share an SM with compute kernels'; it 'uses the minimal "
                "number of SMs to achieve the performance of the platform ... on DGX with 8 NICs "
                "... it would use 16 SMs'), two CTAs per NVLink to saturate large messages (issue "
                "#1703, D. Addison; issue #1225: 24 CTAs over DGX A100's 12 NVLinks), at most 32 "
                "channels (MAXCHANNELS in NCCL's device.h). fabrics.nvlink.communication_sms = "
                "min(2 x NVLinks, 32): A100 12 links -> 24, H100/H200/B200 18 -> 32, H800 8 -> 16; "
                "fabrics.infiniband.communication_sms = 16 (8 NICs a node; not measured for "
                "ConnectX-8)")
SRC_TE_UB_SMS = ("NVIDIA Transformer Engine, pytorch/module/base.py initialize_ub default "
                 "userbuffers config: ring_exchange overlaps (qkv_fprop, fc1_fprop, proj_dgrad, "
                 "fc2_dgrad) num_sm 1 with copy engines (use_ce), pipeline overlaps (proj_fprop, "
                 "fc2_fprop: num_splits 4, set_sm_margin) and bulk overlaps (qkv_dgrad, "
                 "fc1_dgrad, qkv_wgrad, fc1_wgrad) num_sm 16. device.tp_overlap_sms = 16: the SMs "
                 "a pipelined or bulk userbuffer overlap takes from the GEMM beside it (the ring "
                 "exchange takes none)")
TP_OVERLAP_SMS = 16
IB_COMMUNICATION_SMS = 16


def nvlink_sms(links):
    """NCCL channels (one SM each) over NVLink: two per link, at most 32 (SRC_NCCL_SMS)."""
    return min(2 * links, 32)

SRC_HOST_OP = ("NVIDIA/TransformerEngine issue #2053 (2025-08, 'High CPU overhead on Grace "
               "systems'): CPU time of one BF16 Linear forward (hidden 2048, 8192 tokens), "
               "torch.nn.Linear: 13.48 us on an H100 DGX (Xeon Platinum 8480C), 33.17 us on "
               "GH200 and 37.08 us on GB200 (Grace); TE maintainers report TE's Linear since cut "
               "to about torch's (issue #2126). device.host_op_issue_s: the host seconds to issue "
               "one operation of the simulator's op list (framework dispatch and launch)")
# Host seconds per issued operation (SRC_HOST_OP): x86 DGX/HGX hosts and Grace hosts. DGX A100
# (EPYC 7742) and DGX B200 (Xeon 8570) hosts were not measured there: the x86 figure is used.
HOST_OP_X86_S = 13.48e-6
HOST_OP_GRACE_S = 37.08e-6

# Hopper FP8 (E4M3/E5M2 tensor cores): the recipes' GEMM rates relative to the fp8 table (delayed
# and current per-tensor scaling run the same cuBLASLt kernels; blockwise scaling the DeepGEMM
# class of kernels, SRC_DEEPGEMM). MXFP8 needs Blackwell tensor cores.
HOPPER_FP8 = {"fp8_recipes": {"delayed": 1.0, "tensorwise": 1.0, "blockwise": 1350.0 / 1608.6}}

DEVICES = {
    "a100-sxm4-80gb": {
        "peak": {"bf16": 312e12, "fp16": 312e12, "fp32": 19.5e12},
        "memory_mib": 81920,
        "hbm_bw": 2.039e12,
        "sms": 108,
        # GEMM: best-shape cuBLAS BF16 efficiency (MAMF) and per-tile fixed
        # prologue/epilogue cost expressed in k-elements.
        "gemm_rows": gm.A100,
        "gemm_k0_prior": 128,
        # FA2 achieved TFLOP/s at the reference point (seq 16k, 16 heads*batch
        # for d=128 / 32 for d=64, non-causal) -- read from the FA2 paper.
        "attn_anchor_tflops": {("fwd", 128): 225.0, ("fwd", 64): 190.0,
                               ("bwd", 128): 190.0, ("bwd", 64): 165.0},
        "nvlink": {"sms": nvlink_sms(12), "busbw": 230e9, "alpha": 1.2e-6, "launch": 5.0e-6,
                   "half_bytes": 1 * MIB, "a2a_factor": 0.9, "p2p_factor": 1.0},
        "ib": {"sms": IB_COMMUNICATION_SMS, "busbw": 24e9, "alpha": 5.0e-6, "launch": 5.0e-6,
               "half_bytes": MIB // 4, "a2a_factor": 0.7, "p2p_factor": 1.0,
               "what": "InfiniBand HDR 200 Gb/s, one ConnectX-6 NIC per GPU (DGX A100), rail-optimised"},
        "sources": [SRC_A100_SPEC, SRC_NVSMI, SRC_MAMF, SRC_FA2, SRC_NCCL_A100_NVL,
                    SRC_NCCL_A2A, SRC_NCCL_HDR, SRC_NCCL_TREE],
    },
    "h100-sxm5-80gb": {
        "peak": {"bf16": 989e12, "fp16": 989e12, "fp32": 67e12, "fp8": 1979e12},
        "memory_mib": 81559,
        "hbm_bw": 3.35e12,
        "sms": 132,
        "gemm_rows": gm.HOPPER_BF16 + gm.H100_FP8,
        "gemm_layers": gm.HOPPER_LAYERS,
        **HOPPER_FP8,
        "attn_anchor_tflops": {("fwd", 128): 350.0, ("fwd", 64): 300.0,
                               ("bwd", 128): 320.0, ("bwd", 64): 270.0},
        "nvlink": {"sms": nvlink_sms(18), "busbw": 370e9, "alpha": 1.0e-6, "launch": 5.0e-6,
                   "half_bytes": 1 * MIB, "a2a_factor": 0.9, "p2p_factor": 1.0},
        "ib": {"sms": IB_COMMUNICATION_SMS, "busbw": 47e9, "alpha": 5.0e-6, "launch": 5.0e-6,
               "half_bytes": MIB // 2, "a2a_factor": 0.7, "p2p_factor": 1.0,
               "what": "InfiniBand NDR 400 Gb/s, one ConnectX-7 NIC per GPU (DGX/HGX H100), rail-optimised"},
        "sources": [SRC_H100_SPEC, SRC_NVSMI, SRC_MAMF, SRC_FA2, SRC_FA3, SRC_NCCL_H100_NVL,
                    SRC_NCCL_A2A, SRC_NCCL_NDR, SRC_NCCL_TREE, SRC_FP8_SPEC, SRC_FP8_GEMM,
                    SRC_DEEPGEMM],
    },
    "h200-sxm-141gb": {
        "peak": {"bf16": 989e12, "fp16": 989e12, "fp32": 67e12, "fp8": 1979e12},
        "memory_mib": 143771,
        "hbm_bw": 4.8e12,
        "sms": 132,
        # Same GH100 die, clocks and 700 W TDP as H100 SXM: the H100's BF16 measurements (MAMF:
        # "H200 is the same"), its own FP8 ones.
        "gemm_rows": gm.HOPPER_BF16 + gm.H200_FP8,
        "gemm_layers": gm.HOPPER_LAYERS,
        **HOPPER_FP8,
        "attn_anchor_tflops": {("fwd", 128): 350.0, ("fwd", 64): 300.0,
                               ("bwd", 128): 320.0, ("bwd", 64): 270.0},
        "nvlink": {"sms": nvlink_sms(18), "busbw": 370e9, "alpha": 1.0e-6, "launch": 5.0e-6,
                   "half_bytes": 1 * MIB, "a2a_factor": 0.9, "p2p_factor": 1.0},
        "ib": {"sms": IB_COMMUNICATION_SMS, "busbw": 47e9, "alpha": 5.0e-6, "launch": 5.0e-6,
               "half_bytes": MIB // 2, "a2a_factor": 0.7, "p2p_factor": 1.0,
               "what": "InfiniBand NDR 400 Gb/s, one ConnectX-7 NIC per GPU (DGX/HGX H200), rail-optimised"},
        "sources": [SRC_H200_SPEC, SRC_H100_SPEC, SRC_NVSMI, SRC_MAMF, SRC_FA2, SRC_FA3,
                    SRC_NCCL_H100_NVL, SRC_NCCL_A2A, SRC_NCCL_NDR, SRC_NCCL_TREE, SRC_FP8_SPEC,
                    SRC_FP8_GEMM, SRC_DEEPGEMM],
    },
}

# H800: the H100's compute, NVLink at the effective 160 GB/s DeepSeek report for it.
DEVICES["h800-sxm5-80gb"] = dict(
    DEVICES["h100-sxm5-80gb"],
    nvlink={"sms": nvlink_sms(8), "busbw": 160e9, "alpha": 1.0e-6, "launch": 5.0e-6,
            "half_bytes": 1 * MIB, "a2a_factor": 0.9, "p2p_factor": 1.0},
    ib={"sms": IB_COMMUNICATION_SMS, "busbw": 47e9, "alpha": 5.0e-6, "launch": 5.0e-6,
        "half_bytes": MIB // 2, "a2a_factor": 0.7, "p2p_factor": 1.0,
        "what": "InfiniBand NDR 400 Gb/s, one ConnectX-7 NIC per GPU (HGX H800), rail-optimised"},
    sources=[SRC_H800_SPEC, SRC_H100_SPEC, SRC_DEEPSEEK_V3_NET, SRC_NVSMI, SRC_MAMF, SRC_FA2,
             SRC_FA3, SRC_NCCL_A2A, SRC_NCCL_NDR, SRC_NCCL_TREE, SRC_FP8_SPEC, SRC_FP8_GEMM,
             SRC_DEEPGEMM],
)

# --------------------------------------------------------------------------
# Blackwell: B200 (HGX/DGX B200, 8 GPUs per node over NVLink 5), GB200 and GB300 NVL72 (4 GPUs
# per compute tray, 18 trays in one 72-GPU NVLink domain: the cluster's nvlink_domain_size).
# --------------------------------------------------------------------------
SRC_B200_SPEC = ("NVIDIA DGX B200 datasheet and user guide (docs.nvidia.com/dgx/dgxb200-user-guide): "
                 "8x B200, 1,440 GB total HBM3e (180 GB per GPU), 64 TB/s (8 TB/s per GPU), "
                 "72 PFLOPS FP8 training per system (4.5 PFLOP/s dense FP8, 2.25 dense BF16 per "
                 "GPU), 80 TFLOP/s FP32, 5th-gen NVLink 1.8 TB/s per GPU, 8x ConnectX-7 400 Gb/s; "
                 "148 SMs (Chips and Cheese, 'Nvidia's B200: Keeping the CUDA Juggernaut Rolling'); "
                 "nvidia-smi 183359 MiB (AWS p6-b200)")
SRC_GB200_SPEC = ("NVIDIA GB200 NVL72: 72 Blackwell GPUs in one NVLink domain (18 compute trays of 4 "
                  "GPUs, 9 NVSwitch trays, 130 TB/s, 1.8 TB/s per GPU), 720 PFLOPS FP8 sparse per "
                  "rack = 5 PFLOP/s dense FP8 and 2.5 dense BF16 per GPU, 13.4 TB HBM3e (186 GB per "
                  "GPU), 576 TB/s (8 TB/s per GPU); ConnectX-7 400 Gb/s per GPU (DGX SuperPOD GB200 "
                  "reference architecture); 152 SMs; FP32 90 TFLOP/s (G. Klockwood, glennklockwood.com "
                  "'B200'); nvidia-smi 189471 MiB")
SRC_GB300_SPEC = ("NVIDIA GB300 NVL72 (Blackwell Ultra): 72 GPUs in one NVLink domain, 1.8 TB/s per "
                  "GPU (docs.nvidia.com enterprise reference architecture 'NVL72 AI factory'), 5 "
                  "PFLOP/s dense FP8 and 2.5 dense BF16 per GPU (verda.com 'GB300 NVL72 architecture', "
                  "numbers without sparsity), 288 GB HBM3e (nvidia-smi 284208 MiB), 8 TB/s, 160 SMs "
                  "(NVIDIA at Hot Chips 2025, via TweakTown), 4 ConnectX-8 800 Gb/s per 4-GPU tray; "
                  "FP32 taken as GB200's")
SRC_MAMF_BLACKWELL = ("S. Bekman, Machine Learning Engineering Open Book, 'Maximum Achievable Matmul "
                      "FLOPS comparison table': B200 SXM BF16 1,745.0 TFLOP/s (77.6% of 2,250) and "
                      "FP8 E4M3 3,432.5 (76.3% of 4,500); GB200 BF16 1,822.0 (72.9% of 2,500) and FP8 "
                      "3,615.6 (72.3% of 5,000); B300 BF16 1,769.0, FP8 3,353.3")
SRC_FA4 = ("T. Dao et al., FlashAttention-4 (arXiv:2603.05451; Dao-AILab/flash-attention PR #2280, "
           "SM100): B200 BF16 head dim 128, seq 8192, non-causal forward 1,534.8 TFLOP/s, backward "
           "1,359.8. Blackwell profiles model FA4-class kernels (FlashAttention-2 reaches only "
           "~374 TFLOP/s on GB200: Azure AI-benchmarking-guide); head dim 64 is scaled by the "
           "Hopper profiles' 64/128 ratios (no Blackwell measurement found)")
SRC_NCCL_B200 = ("S. Bekman, ML Engineering Open Book, network/README.md: 8x B200 (p6-b200, NCCL "
                 "2.27.7, 8 GiB) all_reduce busbw 682.2 GB/s as a ring with NVLS off (838.0 with "
                 "NVLS, not modelled); NVIDIA GTC25 S72583: GB200 NVL72 all_reduce 680 GB/s without "
                 "NVLS (850 with); coreweave/nccl-tests PR #43: 72-GPU rack all_reduce ~835-847 GB/s "
                 "(NVLS)")
SRC_CX8 = ("NVIDIA ConnectX-8 SuperNIC: 800 Gb/s, twice ConnectX-7's 400 Gb/s; no nccl-tests busbw "
           "published: the NDR per-NIC 47 GB/s scaled by line rate (94 GB/s), an estimate")

# Blackwell FP8: delayed and current per-tensor scaling run the same kernels; MXFP8 (1x32 E8M0
# block scales) at the rate Transformer Engine's GEMM profiling guide measures for it against
# current scaling, pre-quantised, on B300 (a layer's GEMMs in 7.161 ms against 6.812 ms:
# gm.SRC_TE_PROFILING). DeepSeek-style 128x128 blockwise scaling is Hopper's recipe (Transformer
# Engine runs MXFP8 on Blackwell instead): not listed, so refused.
BLACKWELL_FP8 = {"fp8_recipes": {"delayed": 1.0, "tensorwise": 1.0, "mxfp8": 6.812 / 7.161},
                 "fp4_recipes": {"nvfp4": 1.0}}


def scaled_rows(rows, factors):
    """Published rows of one part carried to another by the measured ratio of their MAMF."""
    return [(d, m, n, k, r * factors[d], src + " (scaled by the MAMF ratio %.3f)" % factors[d])
            for d, m, n, k, r, src in rows]


def scaled_layers(layers, factors):
    return [(d, shapes, t / factors[d], src + " (scaled by the MAMF ratio %.3f)" % factors[d])
            for d, shapes, t, src in layers]


# The Grace-attached parts run at a higher power limit than the HGX ones (GB200 1200 W against
# B200's 1000 W; GB300 1400 W): MAMF measures GB200 at 1822.0/1745.0 of B200 in BF16 and
# 3615.6/3432.5 in FP8 (SRC_MAMF_BLACKWELL).
GRACE_OVER_HGX = {"bf16": 1822.0 / 1745.0, "fp8": 3615.6 / 3432.5}
# No MAMF of FP4: its GEMMs carried over at the FP8 ratio.
GRACE_OVER_HGX["fp4"] = GRACE_OVER_HGX["fp8"]

# FA4 on B200; head dim 64 at the Hopper profiles' 300/350 (forward) and 270/320 (backward).
BLACKWELL_ATTN = {("fwd", 128): 1534.8, ("fwd", 64): 1534.8 * 300.0 / 350.0,
                  ("bwd", 128): 1359.8, ("bwd", 64): 1359.8 * 270.0 / 320.0}
NVLINK5 = {"sms": nvlink_sms(18), "busbw": 682e9, "alpha": 1.0e-6, "launch": 5.0e-6,
           "half_bytes": 2 * MIB, "a2a_factor": 0.9, "p2p_factor": 1.0}

DEVICES["b200-sxm-180gb"] = {
    # Dense FP4: 9 PFLOP/s (NVIDIA "Introducing NVFP4": B200 9 dense; pytorch/ao's peak).
    "peak": {"bf16": 2250e12, "fp16": 2250e12, "fp32": 80e12, "fp8": 4500e12, "fp4": 9000e12},
    "memory_mib": 183359,
    "hbm_bw": 8.0e12,
    "sms": 148,
    "gemm_rows": gm.B200 + gm.B200_FP4,
    **BLACKWELL_FP8,
    "attn_anchor_tflops": BLACKWELL_ATTN,
    "nvlink": NVLINK5,
    "ib": {"sms": IB_COMMUNICATION_SMS, "busbw": 47e9, "alpha": 5.0e-6, "launch": 5.0e-6,
           "half_bytes": MIB // 2, "a2a_factor": 0.7, "p2p_factor": 1.0,
           "what": "InfiniBand NDR 400 Gb/s, one ConnectX-7 NIC per GPU (DGX B200), rail-optimised"},
    "sources": [SRC_B200_SPEC, SRC_MAMF_BLACKWELL, SRC_FA4, SRC_NCCL_B200, SRC_NCCL_A2A,
                SRC_NCCL_NDR, SRC_NCCL_TREE],
}
DEVICES["gb200-186gb"] = dict(
    DEVICES["b200-sxm-180gb"],
    peak={"bf16": 2500e12, "fp16": 2500e12, "fp32": 90e12, "fp8": 5000e12, "fp4": 10000e12},
    memory_mib=189471,
    sms=152,
    host_op_issue_s=HOST_OP_GRACE_S,  # Grace host (SRC_HOST_OP)
    # B200's BF16 measurements carried over by the MAMF ratio, beside GB200's own MAMF; its own
    # FP8 ones.
    gemm_rows=(scaled_rows([r for r in gm.B200 if r[0] == "bf16"], GRACE_OVER_HGX) +
               [("bf16", 4096, 9728, 2048, 1822.0, gm.SRC_MAMF)] + gm.GB200_FP8 +
               # NVFP4: B200's explicitly-NVFP4 measurements carried over (Azure's GB200 FP4
               # column does not say which FP4 it ran).
               scaled_rows(gm.B200_FP4, GRACE_OVER_HGX)),
    nvlink=dict(NVLINK5, busbw=680e9),
    ib={"sms": IB_COMMUNICATION_SMS, "busbw": 47e9, "alpha": 5.0e-6, "launch": 5.0e-6,
        "half_bytes": MIB // 2, "a2a_factor": 0.7, "p2p_factor": 1.0,
        "what": "InfiniBand NDR 400 Gb/s, one ConnectX-7 NIC per GPU (GB200 NVL72), across racks"},
    sources=[SRC_GB200_SPEC, SRC_MAMF_BLACKWELL, SRC_FA4, SRC_NCCL_B200, SRC_NCCL_A2A,
             SRC_NCCL_NDR, SRC_NCCL_TREE],
)
# GB300: Blackwell Ultra, its GPU the B300's: B300's own GEMM measurements (not GB200's) carried
# to the Grace-attached part by the MAMF ratio, GB200's attention (no B300 figure), Blackwell
# Ultra's SMs and memory, ConnectX-8 across racks.
DEVICES["gb300-288gb"] = dict(
    DEVICES["gb200-186gb"],
    memory_mib=284208,
    sms=160,
    # Blackwell Ultra: dense NVFP4 15 PFLOP/s, "3x that of FP8" (NVIDIA, "3 Ways NVFP4
    # Accelerates AI Training and Inference").
    peak={"bf16": 2500e12, "fp16": 2500e12, "fp32": 90e12, "fp8": 5000e12, "fp4": 15000e12},
    gemm_rows=scaled_rows(gm.B300, GRACE_OVER_HGX),
    gemm_layers=scaled_layers(gm.B300_LAYERS, GRACE_OVER_HGX),
    ib={"sms": IB_COMMUNICATION_SMS, "busbw": 94e9, "alpha": 5.0e-6, "launch": 5.0e-6,
        "half_bytes": MIB, "a2a_factor": 0.7, "p2p_factor": 1.0,
        "what": "800 Gb/s, one ConnectX-8 SuperNIC per GPU (GB300 NVL72), across racks"},
    sources=[SRC_GB300_SPEC, SRC_GB200_SPEC, SRC_MAMF_BLACKWELL, SRC_FA4, SRC_NCCL_B200, SRC_CX8,
             SRC_NCCL_A2A, SRC_NCCL_NDR, SRC_NCCL_TREE],
)

# --------------------------------------------------------------------------
# GEMM model
# --------------------------------------------------------------------------
GEMM_LAUNCH_S = 4.0e-6
GEMM_HBM_EFF = 0.9
# (tile_m, tile_n, relative per-SM throughput).  Smaller / skinnier tiles
# have lower arithmetic intensity per shared-memory byte, hence < 1; they
# are what a cuBLAS-style heuristic picks when the big tiles quantise badly.
GEMM_TILES = [(128, 256, 1.0), (256, 128, 1.0),
              (64, 256, 0.90), (256, 64, 0.90),
              (128, 128, 0.85),
              (64, 128, 0.70), (128, 64, 0.70)]
SPLITK_MIN_DEPTH = 512


def _ceil_div(a, b):
    return -(-a // b)


def gemm_configs(m, n, k, sms, k0):
    """Yield (shape_factor, splitk_extra_bytes) for every candidate kernel config.

    shape_factor combines tile padding, wave quantisation (one CTA per SM),
    the relative throughput of the tile shape and the fixed per-tile
    prologue/epilogue cost k/(k + k0).  Split-K (power-of-two splits, each at
    least SPLITK_MIN_DEPTH deep) is offered when the tile grid is smaller than
    the GPU; its fp32 partials are written and re-read (extra HBM bytes).
    """
    for tm, tn, rel in GEMM_TILES:
        slots = sms
        tiles_m, tiles_n = _ceil_div(m, tm), _ceil_div(n, tn)
        tiles = tiles_m * tiles_n
        pad = (m * n) / float(tiles_m * tm * tiles_n * tn)
        split = 1
        while True:
            ctas = tiles * split
            wave_eff = ctas / float(_ceil_div(ctas, slots) * slots)
            k_per = k / float(split)
            k_eff = k_per / (k_per + k0)
            extra = 2 * split * m * n * 4 if split > 1 else 0
            yield rel * pad * wave_eff * k_eff, extra
            split *= 2
            if tiles * split > slots or k // split < SPLITK_MIN_DEPTH:
                break


def sustained_rate(peak, eff, factor):
    """FLOP/s of a kernel config: the core efficiency times its shape factor, never above the
    sustained fraction of peak. eff = (core, cap): large GEMMs that fill every SM run at the
    clock the power limit holds (B200 drops 19 % below its top clock after ~5 ms of sustained
    compute: flashinfer-ai/flashinfer PR #2899), so published rates of large shapes level off
    below the best shape a sweep finds; the cap is fitted with the core efficiency."""
    core, cap = eff[0], eff[1]
    return peak * min(core * factor, cap)


def gemm_raw_time(dev, core_eff, m, n, k, dtype="bf16"):
    """Heuristic-selected (fastest modelled) config; no launch overhead.  FP8 reads 1-byte
    inputs and writes a BF16 output. core_eff = (core, cap) (sustained_rate)."""
    peak, bw = dev["peak"][dtype], GEMM_HBM_EFF * dev["hbm_bw"]
    # FP8: 1-byte inputs; NVFP4: E2M1 two to a byte and an E4M3 scale per 16.
    in_bytes = {"fp8": 1.0, "fp4": 0.5 + 1.0 / 16.0}.get(dtype, 2.0)
    base_bytes = in_bytes * (m * k + k * n) + 2.0 * m * n
    best = None
    for factor, extra in gemm_configs(m, n, k, dev["sms"], core_eff[2]):
        t = max(2.0 * m * n * k / sustained_rate(peak, core_eff, factor),
                (base_bytes + extra) / bw)
        best = t if best is None else min(best, t)
    return best


def cap_by_larger(t, I, J, L):
    """In place: each entry of the I x J x L grid becomes the minimum over all entries at or
    beyond it in every index (a shape is never slower than a larger one containing it: it
    could run zero-padded with that kernel)."""
    for i in reversed(range(I)):
        for j in reversed(range(J)):
            for l in reversed(range(L)):
                v = t[(i, j, l)]
                if i + 1 < I:
                    v = min(v, t[(i + 1, j, l)])
                if j + 1 < J:
                    v = min(v, t[(i, j + 1, l)])
                if l + 1 < L:
                    v = min(v, t[(i, j, l + 1)])
                t[(i, j, l)] = v


def gemm_table(dev, core_eff, dtype="bf16"):
    """Full grid.  A problem is never modelled slower than a larger one that
    contains it (it could be run zero-padded with that kernel), so each entry
    is the minimum over all grid points with m'>=m, n'>=n, k'>=k."""
    D = GEMM_DIMS
    N = len(D)
    t = {}
    for i in range(N):
        for j in range(N):
            for l in range(N):
                t[(i, j, l)] = gemm_raw_time(dev, core_eff, D[i], D[j], D[l], dtype)
    cap_by_larger(t, N, N, N)
    return [[D[i], D[j], D[l], t[(i, j, l)] + GEMM_LAUNCH_S]
            for i in range(N) for j in range(N) for l in range(N)]


# The per-tile overhead k0 (in k-elements) is fitted from these candidates, device by device.
GEMM_K0_CHOICES = [64, 96, 128, 160, 192, 256, 320, 384, 512]


def _log_residuals(dev, core_eff, dtype):
    """log(model / measured) for every published row and layer of `dtype`."""
    out = []
    for d, m, n, k, tflops, _ in dev.get("gemm_rows", []):
        if d == dtype:
            t = gemm_raw_time(dev, core_eff, m, n, k, d) + GEMM_LAUNCH_S
            out.append(math.log(2.0 * m * n * k / t / 1e12 / tflops))
    for d, shapes, seconds, _ in dev.get("gemm_layers", []):
        if d == dtype:
            t = sum(gemm_raw_time(dev, core_eff, m, n, k, d) + GEMM_LAUNCH_S for m, n, k in shapes)
            out.append(math.log(seconds / t))
    return out


def _fit_core_eff(dev, dtype, cap, k0):
    """The core efficiency minimising the squared log errors under `cap` (golden section)."""
    def cost(e):
        return sum(r * r for r in _log_residuals(dev, (e, cap, k0), dtype))
    lo, hi = 0.2, 1.0  # a kernel config never beats the tensor cores' peak
    g = (math.sqrt(5.0) - 1.0) / 2.0
    a, b = hi - g * (hi - lo), lo + g * (hi - lo)
    for _ in range(40):
        if cost(a) < cost(b):
            hi, b = b, a
            a = hi - g * (hi - lo)
        else:
            lo, a = a, b
            b = lo + g * (hi - lo)
    e = 0.5 * (lo + hi)
    return (e, cap, k0), cost(e)


# Sustained caps tried, as fractions of peak (1.0: no cap).
GEMM_CAP_CHOICES = [0.50 + 0.02 * i for i in range(26)]


def fit_gemm(dev):
    """({dtype: (core, cap, k0)}, rms log error) fitted to the device's published GEMM rates,
    each dtype on its own (a tile's fixed cost in k-elements depends on the element width)."""
    dtypes = sorted({r[0] for r in dev.get("gemm_rows", [])} |
                    {r[0] for r in dev.get("gemm_layers", [])})
    effs, total, count = {}, 0.0, 0
    for d in dtypes:
        # No shape sustains more than the fastest one measured (MAMF is by definition the
        # maximum achievable): the cap stays at or below it.
        best_measured = max([r[4] * 1e12 / dev["peak"][d] for r in dev.get("gemm_rows", [])
                             if r[0] == d] or [1.0])
        caps = [c for c in GEMM_CAP_CHOICES if c <= best_measured] or [best_measured]
        fits = [min((_fit_core_eff(dev, d, cap, k0) for cap in caps), key=lambda x: x[1])
                for k0 in GEMM_K0_CHOICES]
        least = min(cost for _, cost in fits)
        # Where the measurements cannot tell the tile overheads apart (A100's two shapes), the
        # prior: the per-tile overhead the tile model used before the fit (128 on A100, 192).
        eff, cost = min((f for f in fits if f[1] <= least * (1.0 + 1e-3) + 1e-12),
                        key=lambda f: abs(f[0][2] - dev.get("gemm_k0_prior", 192)))
        effs[d] = eff
        total += cost
        count += len(_log_residuals(dev, eff, d))
    return effs, math.sqrt(total / count)


# --------------------------------------------------------------------------
# Grouped GEMM model (MoE experts: G GEMMs of one shape, each with its own weight)
# --------------------------------------------------------------------------
# Transformer Engine's GroupedLinear (what Megatron-Core's --moe-grouped-gemm runs) issues one
# cuBLAS GEMM per group, round-robin over 4 compute streams (SRC_GROUPED): 4 GEMMs share the SMs
# at a time, so their tiles form one wave-quantised grid and each round pays a launch.
GROUPED_STREAMS = 4
# Compute and memory time combine as (tc^p + tm^p)^(1/p) rather than max(): each group streams
# its own weight, which its tiles cannot hide behind the math as a dense GEMM's reused operands
# are. p from the two TE PR #2045 multi-stream points (SRC_GROUPED): 2.5 gives 626 and 586
# TFLOP/s for their 628 and 554.
GROUPED_OVERLAP_P = 2.5


def grouped_raw_time(dev, core_eff, groups, m, n, k, dtype="bf16"):
    peak, bw = dev["peak"][dtype], GEMM_HBM_EFF * dev["hbm_bw"]
    in_bytes = {"fp8": 1.0, "fp4": 0.5 + 1.0 / 16.0}.get(dtype, 2.0)
    streams = min(groups, GROUPED_STREAMS)
    rounds = _ceil_div(groups, streams)
    base_bytes = streams * (in_bytes * (m * k + k * n) + 2.0 * m * n)
    best = None
    for tm, tn, rel in GEMM_TILES:
        per_group = _ceil_div(m, tm) * _ceil_div(n, tn)
        pad = (m * n) / float(per_group * tm * tn)
        tiles = streams * per_group
        wave = tiles / float(_ceil_div(tiles, dev["sms"]) * dev["sms"])
        factor = rel * pad * wave * k / (k + core_eff[2])
        tc = 2.0 * streams * m * n * k / sustained_rate(peak, core_eff, factor)
        tmem = base_bytes / bw
        t = (tc ** GROUPED_OVERLAP_P + tmem ** GROUPED_OVERLAP_P) ** (1.0 / GROUPED_OVERLAP_P)
        best = t if best is None else min(best, t)
    return rounds * (best + GEMM_LAUNCH_S)


def grouped_gemm_table(dev, core_eff, dtype="bf16"):
    """Full groups x m x n x k grid; like the GEMM table, a shape is never slower than a larger
    one of the same group count containing it (zero padding)."""
    rows = []
    for g in GROUPED_GROUPS:
        t = {}
        for i, m in enumerate(GROUPED_MK):
            for j, n in enumerate(GROUPED_N):
                for l, k in enumerate(GROUPED_MK):
                    t[(i, j, l)] = grouped_raw_time(dev, core_eff, g, m, n, k, dtype)
        I, J, L = len(GROUPED_MK), len(GROUPED_N), len(GROUPED_MK)
        cap_by_larger(t, I, J, L)
        rows += [[g, GROUPED_MK[i], GROUPED_N[j], GROUPED_MK[l], t[(i, j, l)]]
                 for i in range(I) for j in range(J) for l in range(L)]
    return rows


def grouped_method_text():
    return (" grouped_gemm (MoE experts; rows groups, m, n, k per group, seconds): Transformer "
            "Engine's GroupedLinear, one cuBLAS GEMM per group over %d streams: rounds of %d "
            "concurrent GEMMs, each round the gemm tile model over their tiles together (wave "
            "quantisation over all of them, no split-K) plus one launch; compute and memory "
            "(every group reads its own weight) combine as (tc^p + tm^p)^(1/p), p = %.1f from "
            "the TE PR #2045 grouped micro-benchmark; same monotone cap as gemm."
            % (GROUPED_STREAMS, GROUPED_STREAMS, GROUPED_OVERLAP_P))


# --------------------------------------------------------------------------
# Attention model (FlashAttention-2 class, bf16)
# --------------------------------------------------------------------------
ATTN_BLOCK = 128                 # query block (fwd) / key block (bwd) per CTA
ATTN_L0 = {"fwd": 256.0, "bwd": 512.0}   # fixed per-CTA cost in kv-length units
ATTN_LAUNCH = {"fwd": 5.0e-6, "bwd": 15.0e-6}   # bwd = preprocess + main + dQ convert
ATTN_HBM_EFF = 0.9
ATTN_REF = {128: (16, 16384), 64: (32, 16384)}  # (batch*heads, seq) of the anchor


def attn_flops(bh, s, d, causal, direction):
    f = 4.0 * bh * s * s * d
    if causal:
        f /= 2.0
    return f * (2.5 if direction == "bwd" else 1.0)


def attn_factor(bh, s, causal, direction, sms):
    nb = _ceil_div(s, ATTN_BLOCK)
    ctas = bh * nb
    wave_eff = ctas / float(_ceil_div(ctas, sms) * sms)
    if causal:
        kv_len = (s + ATTN_BLOCK) / 2.0                 # mean kv blocks per CTA
        useful = nb * nb / 2.0
        done = nb * (nb + 1) / 2.0 + 0.25 * nb          # diagonal blocks + masking
        mask_eff = useful / done
    else:
        kv_len = float(s)
        mask_eff = 1.0
    seq_eff = kv_len / (kv_len + ATTN_L0[direction])
    return wave_eff * seq_eff * mask_eff


def attn_core_eff(dev, direction, d):
    bh, s = ATTN_REF[d]
    anchor = dev["attn_anchor_tflops"][(direction, d)] * 1e12
    return anchor / (dev["peak"]["bf16"] * attn_factor(bh, s, 0, direction, dev["sms"]))


def attn_time(dev, core, bh, s, d, causal, direction):
    compute = attn_flops(bh, s, d, causal, direction) / (
        dev["peak"]["bf16"] * core * attn_factor(bh, s, causal, direction, dev["sms"]))
    tensors = 4 if direction == "fwd" else 10   # fwd: Q,K,V,O ; bwd: Q,K,V,O,dO,dQ,dK,dV + fp32 dQ acc
    mem = bh * s * d * 2.0 * tensors / (ATTN_HBM_EFF * dev["hbm_bw"])
    return max(compute, mem) + ATTN_LAUNCH[direction]


# --------------------------------------------------------------------------
# Collective model (nccl-tests conventions; bytes = whole buffer)
# --------------------------------------------------------------------------
def busbw_eff(f, nbytes):
    return f["busbw"] * nbytes / (nbytes + f["half_bytes"])


def coll_time(f, op, n, nbytes, tree_allreduce):
    a, c0 = f["alpha"], f["launch"]
    bw = busbw_eff(f, nbytes)
    if op == "all_reduce":
        ring = 2 * (n - 1) * a + 2.0 * (n - 1) / n * nbytes / bw
        t = ring
        if tree_allreduce and n > 2:
            tree = 2 * math.log2(n) * a + 2.0 * (n - 1) / n * nbytes / (0.9 * bw)
            t = min(ring, tree)
    elif op in ("all_gather", "reduce_scatter"):
        t = (n - 1) * a + (n - 1.0) / n * nbytes / bw
    elif op == "all_to_all":
        t = (n - 1) * a + (n - 1.0) / n * nbytes / (f["a2a_factor"] * bw)
    elif op == "broadcast":
        t = math.log2(n) * a + nbytes / bw
    elif op == "send_recv":
        t = a + nbytes / (f["p2p_factor"] * bw)
    else:
        raise ValueError(op)
    return c0 + t


def fabric_block(f, scope, groups, tree_allreduce):
    colls = {}
    for op in COLLECTIVES:
        gs = [2] if op == "send_recv" else groups
        colls[op] = [[n, b, coll_time(f, op, n, b, tree_allreduce)]
                     for n in gs for b in COLL_BYTES]
    return {"scope": scope, "alpha_s": f["alpha"],
            "bus_bandwidth_bytes_per_s": f["busbw"], "communication_sms": f["sms"],
            "collectives": colls}


# --------------------------------------------------------------------------
# Assembly
# --------------------------------------------------------------------------
def method_text(name, dev, gemm_core, attn_cores):
    nv, ib = dev["nvlink"], dev["ib"]
    return (
        "Derived, not measured and not fitted to end-to-end training throughput. Every entry is "
        "computed by %s from a physically motivated model whose free efficiency constants are "
        "anchored on cited public specifications and published kernel / nccl-tests benchmark "
        "figures. device: vendor peak dense tensor FLOP/s, FP32 non-tensor FLOP/s and HBM "
        "bandwidth; memory_bytes = nvidia-smi reported total (%d MiB) x 2^20. gemm (bf16 in, fp32 "
        "accumulate, C[m,n]=A[m,k]B[k,n]): time = max(compute, memory) + %.0f us launch; compute = "
        "2mnk / (peak x core_eff x shape_factor), the fastest modelled config over CTA tiles "
        "{128x256, 256x128 (1.0x); 64x256, 256x64 (0.90x); 128x128 (0.85x); 64x128, 128x64 "
        "(0.70x relative throughput)} and power-of-two split-K (when the tile grid is smaller "
        "than the GPU, min depth %d per split) is used, with shape_factor = tile padding x wave "
        "quantisation over %d SMs x k/(k+%d) per-tile prologue/epilogue; "
        "k0, the core efficiency per dtype and the sustained cap per dtype (rate = peak x min(core_eff "
        "x shape_factor, cap): large GEMMs run at the power-limited clock; bf16 %.4f, cap %.2f of "
        "peak) are fitted by least squares in log space "
        "to the published per-shape GEMM rates in the sources (profiles/tools/gemm_measurements.py: "
        "%d shapes, rms error %.1f%%), so entries are what real shapes sustain in benchmarks of many "
        "milliseconds, not the best shape of a sweep; memory = (2(mk+kn+mn) bytes + split-K "
        "fp32 partials) / (0.9 x HBM bw); finally each entry is capped by every larger grid point "
        "containing it (a zero-padded larger kernel bounds it), making the table monotone. attention (FlashAttention-2 class, NOT FlashAttention-3; "
        "bf16): FLOPs fwd = 4 x batch_heads x seq^2 x head_dim (halved when causal), bwd = 2.5x "
        "fwd; time = max(FLOPs/(peak x core_eff x wave_eff x seq_eff x mask_eff), IO/(0.9 x HBM "
        "bw)) + launch (fwd 5 us, bwd 15 us); 128-row blocks per CTA, wave_eff = CTA wave "
        "quantisation, seq_eff = L/(L+L0) with L the mean kv length per CTA and L0 = 256 (fwd) / "
        "512 (bwd), mask_eff = causal diagonal-block overhead; core_eff per (direction, head_dim) "
        "calibrated so batch_heads 16 (d=128) / 32 (d=64), seq 16384, non-causal reproduces "
        "published FA2 throughput (TFLOP/s fwd d128 %.0f, fwd d64 %.0f, bwd d128 %.0f, bwd d64 %.0f). "
        "memory_bound: time = 3 us launch + bytes/(eff x HBM bw), bytes = total read+written, eff = "
        "layernorm 0.85, rmsnorm 0.87, gelu 0.88, swiglu 0.88, softmax_cross_entropy 0.80, adamw "
        "0.75 (multi-tensor fp32 optimizer streams, lower than plain streaming), elementwise 0.90. "
        "fabrics (nccl-tests conventions, bytes = whole buffer; busbw_eff(b) = busbw x b/(b + "
        "b_half), so b_half/busbw acts as a pipeline-fill latency): all_reduce = 2(n-1)a + 2(n-1)/n b/busbw_eff, all_gather/reduce_scatter = (n-1)a "
        "+ (n-1)/n b/busbw_eff, all_to_all = same with busbw x a2a_factor, broadcast = log2(n)a + "
        "b/busbw_eff, send_recv (group 2) = a + b/busbw_eff; every time also includes a constant "
        "%.0f us kernel-launch/synchronisation overhead not contained in alpha_s. nvlink: ring (no "
        "NVLS/SHARP) busbw %.0f GB/s, alpha %.1f us/step, b_half %d KiB, all_to_all factor %.1f. "
        "infiniband: %s; groups count GPUs, one per node each on its own NIC; busbw %.0f GB/s per "
        "NIC, alpha %.1f us/step, b_half %d KiB, all_to_all factor %.1f (alltoall over the network "
        "falls short of ring peak), all_reduce = min(ring, double-binary-tree 2 log2(n) a + ring "
        "bandwidth term / 0.9) as NCCL selects tree for small messages at scale."
        % (GENERATED_BY, dev["memory_mib"], GEMM_LAUNCH_S * 1e6, SPLITK_MIN_DEPTH, dev["sms"],
           gemm_core[2], gemm_core[0], gemm_core[1],
           len(dev.get("gemm_rows", [])) + len(dev.get("gemm_layers", [])),
           100 * dev["gemm_fit_rms"],
           dev["attn_anchor_tflops"][("fwd", 128)], dev["attn_anchor_tflops"][("fwd", 64)],
           dev["attn_anchor_tflops"][("bwd", 128)], dev["attn_anchor_tflops"][("bwd", 64)],
           nv["launch"] * 1e6, nv["busbw"] / 1e9, nv["alpha"] * 1e6, nv["half_bytes"] // 1024,
           nv["a2a_factor"], ib["what"], ib["busbw"] / 1e9, ib["alpha"] * 1e6,
           ib["half_bytes"] // 1024, ib["a2a_factor"]))


def fp8_method_text(dev, fp8_core):
    if fp8_core is None:
        return ""
    recipes = dev["fp8_recipes"]
    rates = ", ".join("%s %.3f" % (k, v) for k, v in recipes.items())
    return (" gemm fp8 (E4M3/E5M2 in, BF16 out, FP32 accumulate): the same tile model at the "
            "FP8 dense peak with 1-byte inputs, its core efficiency (%.4f) and cap (%.2f of peak) "
            "fitted with the BF16 ones to the published FP8 rates. device.fp8_recipes: each "
            "recipe's GEMM rate relative "
            "to that table (%s: delayed and tensorwise run the same kernels; blockwise is "
            "DeepGEMM's published rate over cuBLASLt's, mxfp8 Transformer Engine's measured "
            "MXFP8 layer against current scaling)." % (fp8_core[0], fp8_core[1], rates))


def fp4_method_text(fp4_core):
    if fp4_core is None:
        return ""
    return (" gemm fp4 (NVFP4: E2M1 inputs with an E4M3 scale per 16, 0.5625 bytes an element, "
            "BF16 out): the same tile model at the dense FP4 peak, its core efficiency (%.4f) "
            "and cap (%.2f of peak) fitted to the published NVFP4 rates; device.fp4_recipes "
            "{nvfp4: 1.0} (Megatron-Core's --fp4-recipe nvfp4 on that table)."
            % (fp4_core[0], fp4_core[1]))


# The generation each device belongs to (device.architecture): how `trident accuracy` groups the
# published runs it checks the simulator against.
ARCHITECTURE = {"a100-sxm4-80gb": "ampere", "h100-sxm5-80gb": "hopper", "h200-sxm-141gb": "hopper",
                "h800-sxm5-80gb": "hopper", "b200-sxm-180gb": "blackwell",
                "gb200-186gb": "blackwell", "gb300-288gb": "blackwell"}


def gemm_sources(dev):
    """The distinct sources of the GEMM rates the device's tables are fitted to."""
    out = []
    for row in dev.get("gemm_rows", []) + dev.get("gemm_layers", []):
        if row[-1] not in out:
            out.append(row[-1])
    return out


def build_profile(name, dev):
    cores_by_dtype, rms = fit_gemm(dev)
    dev = dict(dev, gemm_fit_rms=rms)
    gcore = cores_by_dtype["bf16"]
    fcore = cores_by_dtype.get("fp8")
    gemm = {"bf16": gemm_table(dev, gcore)}
    grouped = {"bf16": grouped_gemm_table(dev, gcore)}
    device_extra = {}
    if fcore is not None:
        gemm["fp8"] = gemm_table(dev, fcore, "fp8")
        grouped["fp8"] = grouped_gemm_table(dev, fcore, "fp8")
        device_extra["fp8_recipes"] = dict(dev["fp8_recipes"])
    qcore = cores_by_dtype.get("fp4")
    if qcore is not None:
        gemm["fp4"] = gemm_table(dev, qcore, "fp4")
        grouped["fp4"] = grouped_gemm_table(dev, qcore, "fp4")
        device_extra["fp4_recipes"] = dict(dev["fp4_recipes"])
    cores = {(dr, d): attn_core_eff(dev, dr, d) for dr in ("fwd", "bwd") for d in ATTN_HD}
    attn = []
    for bh in ATTN_BH:
        for s in ATTN_SEQ:
            for d in ATTN_HD:
                for c in ATTN_CAUSAL:
                    attn.append([bh, s, d, c,
                                 attn_time(dev, cores[("fwd", d)], bh, s, d, c, "fwd"),
                                 attn_time(dev, cores[("bwd", d)], bh, s, d, c, "bwd")])
    mem = {op: [[b, MEM_LAUNCH_S + b / (eff * dev["hbm_bw"])] for b in MEM_BYTES]
           for op, eff in MEM_KERNEL_EFF.items()}
    return {
        "format": FORMAT,
        "name": name,
        "provenance": {
            "kind": "derived",
            "method": (method_text(name, dev, gcore, cores) + fp8_method_text(dev, fcore) +
                       fp4_method_text(qcore) +
                       grouped_method_text()),
            "sources": dev["sources"] + gemm_sources(dev) +
                       [SRC_COMM_SMS, SRC_NCCL_SMS, SRC_TE_UB_SMS, SRC_HOST_OP, SRC_GROUPED],
            "generated_by": GENERATED_BY,
            "date": DATE,
        },
        "device": {
            "architecture": ARCHITECTURE[name],
            "peak_flops_per_s": dict(dev["peak"]),
            "memory_bytes": dev["memory_mib"] * MIB,
            "memory_bandwidth_bytes_per_s": dev["hbm_bw"],
            "sms": dev["sms"],
            "communication_sms": COMMUNICATION_SMS,
            "tp_overlap_sms": TP_OVERLAP_SMS,
            "host_op_issue_s": dev.get("host_op_issue_s", HOST_OP_X86_S),
            **device_extra,
        },
        "kernels": {
            "gemm": gemm,
            "grouped_gemm": grouped,
            "attention": {"bf16": attn},
            "memory_bound": mem,
        },
        "fabrics": {
            "nvlink": fabric_block(dev["nvlink"], "intra_node", NVLINK_GROUPS, False),
            "infiniband": fabric_block(dev["ib"], "inter_node", IB_GROUPS, True),
        },
    }


# --------------------------------------------------------------------------
# Serialisation: pretty structure, one table row per line.
# --------------------------------------------------------------------------
def _num(x):
    if isinstance(x, bool):
        return "true" if x else "false"
    if isinstance(x, int):
        return str(x)
    if isinstance(x, float):
        if not math.isfinite(x):
            raise ValueError("non-finite value")
        r = "%.6g" % x
        if "e" not in r and "." not in r:
            r += ".0"
        return r
    return json.dumps(x)


def _is_row(v):
    return isinstance(v, list) and all(isinstance(e, (int, float)) for e in v)


def dump(v, ind=0):
    pad, pad1 = " " * ind, " " * (ind + 1)
    if isinstance(v, dict):
        items = ["%s%s: %s" % (pad1, json.dumps(k), dump(x, ind + 1)) for k, x in v.items()]
        return "{\n" + ",\n".join(items) + "\n" + pad + "}"
    if isinstance(v, list):
        if _is_row(v):
            return "[" + ", ".join(_num(e) for e in v) + "]"
        if v and all(_is_row(e) for e in v):
            return "[\n" + ",\n".join(pad1 + dump(e) for e in v) + "\n" + pad + "]"
        return "[\n" + ",\n".join(pad1 + dump(e, ind + 1) for e in v) + "\n" + pad + "]"
    return _num(v)


def main(argv=None):
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out-dir", default=os.path.join(os.path.dirname(here), "devices"))
    args = ap.parse_args(argv)
    os.makedirs(args.out_dir, exist_ok=True)
    for name, dev in DEVICES.items():
        text = dump(build_profile(name, dev)) + "\n"
        json.loads(text)  # must round-trip
        path = os.path.join(args.out_dir, name + ".json")
        with open(path, "w") as fh:
            fh.write(text)
        print("wrote %s (%d bytes)" % (path, len(text.encode())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
