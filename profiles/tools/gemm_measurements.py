"""Published GEMM micro-benchmarks the derived GEMM tables are calibrated on.

Each device's tile model (derive_profiles.gemm_raw_time) has one free core efficiency per dtype
and one per-tile overhead k0; both are fitted by least squares in log space to the published
per-shape rates below, so the tables give what GEMMs of real shapes sustain in benchmarks that
run for many milliseconds (long enough to reach the power-limited clock: B200 throttles after
about 5 ms, flashinfer-ai/flashinfer PR #2899), not the single best shape a brute-force sweep
finds. No entry is an end-to-end training figure.

A row is (dtype, m, n, k, TFLOP/s, source): C[m x n] = A[m x k] B[k x n], rate = 2mnk / time.
A "layer" row is (dtype, [(m, n, k), ...], seconds, source): the sum of those GEMMs' times.
"""

SRC_MAMF = ("S. Bekman, Machine Learning Engineering Open Book (stas00/ml-engineering@744d01e1), "
            "compute/accelerator/README.md 'Maximum Achievable Matmul FLOPS comparison table': "
            "torch.matmul, mean of 100 iterations after 50 warm-up, the best of a brute-force "
            "shape sweep")
SRC_FLUX = ("bytedance/flux@79807b71:docs/performance_report.md: PyTorch GEMM of each rank's share "
            "of M=4096, K=12288, N=49152 at TP 8 (4096 x 6144 x 12288): 2.438 ms on A800 (A100 "
            "compute), 0.846 ms on H800 (H100 compute)")
SRC_AZURE = ("Azure/AI-benchmarking-guide@8fd0c6e1 Azure_Results/ND_H100_v5_results.md, "
             "ND_H200_v5_results.md and @2a370be6 ND_GB200_v6_results.md: cuBLASLt GEMMs by shape "
             "after 10,000 warm-up iterations")
SRC_AO_NVFP4 = ("pytorch/ao PR #2427, benchmarks/float8/bench_matmul.py on B200: square BF16 and "
                "NVFP4 GEMMs")
SRC_VLLM = ("vllm-project/vllm PR #19566, bench_fp8_gemm.py on B200, N = K = 4096 (Llama-3.1-8B): "
            "BF16 and FP8 per-tensor without the quantisation")
SRC_TE_PROFILING = ("NVIDIA/TransformerEngine@d0067d0d docs/examples/gemm_profiling/"
                    "gemm_profiling.rst (PR #2863): B300 SXM6, hidden 4096, FFN 16384, 15,872 "
                    "tokens; BF16 Fprop per GEMM, and per layer (Fprop + Dgrad + Wgrad of QKV, "
                    "attention out, MLP up and down) pre-quantised: BF16 13.102 ms, FP8 current "
                    "scaling 6.812, MXFP8 7.161, NVFP4 3.764")

# A transformer layer of the TE guide: its four linear layers' Fprop, Dgrad and Wgrad.
_TE_TOKENS, _TE_H, _TE_F = 15872, 4096, 16384


def _te_layer():
    shapes = []
    for k, n in [(_TE_H, 3 * _TE_H), (_TE_H, _TE_H), (_TE_H, _TE_F), (_TE_F, _TE_H)]:
        shapes += [(_TE_TOKENS, n, k), (_TE_TOKENS, k, n), (k, n, _TE_TOKENS)]
    return shapes


# H200 NVL (the 600 W PCIe part; dense peaks 835.5 BF16 and 1,671 FP8 TFLOP/s, half the
# sparse 1,671 and 3,341 of NVIDIA's H200 NVL datasheet) whole layers of the same guide, carried
# to the SXM parts' 989 / 1,979 TFLOP/s peaks in proportion: BF16 31.968 ms, FP8 current
# scaling 16.785 ms pre-quantised. (Carried over, the FP8 layer runs at 1,352 TFLOP/s: the
# plateau Azure measures on H100 SXM, 1,351-1,382, which supports the proportion.)
SRC_TE_H200NVL = SRC_TE_PROFILING.replace("B300 SXM6", "H200 NVL") + (
    " (H200 NVL layers: BF16 31.968 ms, FP8 current scaling 16.785 ms, scaled by the SXM/NVL "
    "peak ratio 989/835.5)")
H200NVL_TO_SXM = 989.0 / 835.5

A100 = [
    ("bf16", 1024, 10240, 5120, 271.2, SRC_MAMF),
    ("bf16", 4096, 6144, 12288, 2 * 4096 * 6144 * 12288 / 2.438e-3 / 1e12, SRC_FLUX),
]
HOPPER_BF16 = [
    ("bf16", 2048, 2048, 13312, 794.5, SRC_MAMF),
    ("bf16", 4096, 6144, 12288, 2 * 4096 * 6144 * 12288 / 0.846e-3 / 1e12, SRC_FLUX),
]
HOPPER_LAYERS = [
    ("bf16", _te_layer(), 31.968e-3 / H200NVL_TO_SXM, SRC_TE_H200NVL),
    ("fp8", _te_layer(), 16.785e-3 / H200NVL_TO_SXM, SRC_TE_H200NVL),
]
H100_FP8 = [
    ("fp8", 1024, 9216, 14336, 1402.6, SRC_MAMF),
    ("fp8", 1024, 1024, 1024, 274.1, SRC_AZURE),
    ("fp8", 2048, 2048, 2048, 1011.3, SRC_AZURE),
    ("fp8", 4096, 4096, 4096, 1216.9, SRC_AZURE),
    ("fp8", 8192, 8192, 8192, 1290.1, SRC_AZURE),
    ("fp8", 16384, 16384, 16384, 1377.3, SRC_AZURE),
    ("fp8", 32768, 32768, 32768, 1382.2, SRC_AZURE),
    ("fp8", 1024, 2145, 1024, 410.7, SRC_AZURE),
    ("fp8", 6144, 12288, 12288, 1351.4, SRC_AZURE),
]
H200_FP8 = [
    ("fp8", 1280, 4096, 12032, 1453.4, SRC_MAMF),
    ("fp8", 1024, 1024, 1024, 290.8, SRC_AZURE),
    ("fp8", 2048, 2048, 2048, 1013.4, SRC_AZURE),
    ("fp8", 4096, 4096, 4096, 1249.1, SRC_AZURE),
    ("fp8", 8192, 8192, 8192, 1300.6, SRC_AZURE),
    ("fp8", 16384, 16384, 16384, 1366.3, SRC_AZURE),
    ("fp8", 32768, 32768, 32768, 1349.5, SRC_AZURE),
    ("fp8", 1024, 2145, 1024, 407.9, SRC_AZURE),
    ("fp8", 6144, 12288, 12288, 1318.0, SRC_AZURE),
]
B200 = [
    ("bf16", 1792, 16128, 3072, 1745.0, SRC_MAMF),
    ("bf16", 1024, 1024, 1024, 423.0, SRC_AO_NVFP4),
    ("bf16", 2048, 2048, 2048, 1130.0, SRC_AO_NVFP4),
    ("bf16", 3072, 3072, 3072, 1510.0, SRC_AO_NVFP4),
    ("bf16", 4096, 4096, 4096, 1410.0, SRC_AO_NVFP4),
    ("bf16", 6144, 6144, 6144, 1450.0, SRC_AO_NVFP4),
    ("bf16", 8192, 8192, 8192, 1420.0, SRC_AO_NVFP4),
    ("bf16", 512, 4096, 4096, 1335.8, SRC_VLLM),
    ("bf16", 1024, 4096, 4096, 1362.7, SRC_VLLM),
    ("bf16", 2048, 4096, 4096, 1444.4, SRC_VLLM),
    ("fp8", 15360, 4096, 3072, 3432.5, SRC_MAMF),
    ("fp8", 512, 4096, 4096, 1832.0, SRC_VLLM),
    ("fp8", 1024, 4096, 4096, 2076.7, SRC_VLLM),
]
GB200_FP8 = [
    ("fp8", 19456, 5120, 1536, 3615.6, SRC_MAMF),
    ("fp8", 1024, 1024, 1024, 489.2, SRC_AZURE),
    ("fp8", 2048, 2048, 2048, 2243.6, SRC_AZURE),
    ("fp8", 4096, 4096, 4096, 2834.6, SRC_AZURE),
    ("fp8", 8192, 8192, 8192, 2876.6, SRC_AZURE),
    ("fp8", 16384, 16384, 16384, 2906.9, SRC_AZURE),
    ("fp8", 32768, 32768, 32768, 2825.6, SRC_AZURE),
    ("fp8", 1024, 2145, 1024, 1022.2, SRC_AZURE),
    ("fp8", 6144, 12288, 12288, 2895.6, SRC_AZURE),
]
# B300 (Blackwell Ultra, the GB300's GPU): BF16 Fprop per shape and whole layers.
B300 = [
    ("bf16", 12288, 18432, 1024, 1769.0, SRC_MAMF),
    ("bf16", _TE_TOKENS, 3 * _TE_H, _TE_H, 2 * _TE_TOKENS * 3 * _TE_H * _TE_H / 1.071e-3 / 1e12,
     SRC_TE_PROFILING),
    ("bf16", _TE_TOKENS, _TE_H, _TE_H, 2 * _TE_TOKENS * _TE_H * _TE_H / 0.307e-3 / 1e12,
     SRC_TE_PROFILING),
    ("bf16", _TE_TOKENS, _TE_F, _TE_H, 2 * _TE_TOKENS * _TE_F * _TE_H / 1.393e-3 / 1e12,
     SRC_TE_PROFILING),
    ("bf16", _TE_TOKENS, _TE_H, _TE_F, 2 * _TE_TOKENS * _TE_H * _TE_F / 1.426e-3 / 1e12,
     SRC_TE_PROFILING),
    ("fp8", 3072, 6144, 7168, 3353.3, SRC_MAMF),
]
B300_LAYERS = [
    ("bf16", _te_layer(), 13.102e-3, SRC_TE_PROFILING),
    ("fp8", _te_layer(), 6.812e-3, SRC_TE_PROFILING),
    ("fp4", _te_layer(), 3.764e-3, SRC_TE_PROFILING),
]
# NVFP4 (E2M1 with E4M3 scales per 16): pytorch/ao's square GEMMs on B200 (its script's FP4
# peak 9e15). Not used: Azure's cuBLASLt "FP4" column on GB200 (7,536 TFLOP/s at 8192³), which
# does not say which FP4 format it ran and sits well above the NVFP4 rates measured on B200 and
# B300.
B200_FP4 = [
    ("fp4", 1024, 1024, 1024, 366.0, SRC_AO_NVFP4),
    ("fp4", 2048, 2048, 2048, 1680.0, SRC_AO_NVFP4),
    ("fp4", 3072, 3072, 3072, 3510.0, SRC_AO_NVFP4),
    ("fp4", 4096, 4096, 4096, 4460.0, SRC_AO_NVFP4),
    ("fp4", 6144, 6144, 6144, 5500.0, SRC_AO_NVFP4),
    ("fp4", 8192, 8192, 8192, 5370.0, SRC_AO_NVFP4),
]
