#pragma once
// NVFP4 numerics on the CPU as quantize → dequantize in fp32: the values an NVFP4 GEMM sees,
// for the executor's NVFP4 recipe (Megatron-Core --fp4-format e2m1 --fp4-recipe nvfp4) and as
// the reference a device path is tested against. Transformer Engine's NVFP4BlockScaling
// (transformer_engine/common/recipe/__init__.py; "Pretraining Large Language Models with
// NVFP4", arXiv 2509.25149):
//   - elements in E2M1: ±{0, 0.5, 1, 1.5, 2, 3, 4, 6};
//   - two-level scales: a per-tensor fp32 s_global = amax_tensor / (448 · 6), and per block of
//     16 values an E4M3 block scale, fp8_round((amax_block / 6) / s_global); a value decodes as
//     e2m1 · block scale · s_global;
//   - weights in 16 × 16 blocks (one scale for both of a weight's GEMM orientations),
//     activations and gradients in 1 × 16 blocks along the GEMM's contraction dimension;
//   - gradients rounded stochastically (deterministic here: a hash of the element's index and
//     a caller's seed), everything else to nearest, ties to even;
//   - the weight-gradient GEMM's operands (contracted over the tokens) pass through a 16 × 16
//     random Hadamard transform first, which the GEMM's two operands cancel: here the values
//     are transformed, quantized and transformed back.
#include <cstdint>

namespace trident::kernels::cpu {

inline constexpr std::int64_t kNvfp4Block = 16;
inline constexpr float kE2m1Max = 6.0f;

// x rounded to E2M1 (saturating at ±6): to nearest with ties to even, or stochastically with
// `uniform` in [0, 1) choosing between the two neighbours in proportion to the distance.
float e2m1_round(float x);
float e2m1_round_stochastic(float x, float uniform);

struct Nvfp4Layout {
    bool contract_rows = false; // the 16-blocks run down columns (a wgrad operand), else rows
    bool square_blocks = false; // 16 × 16 blocks (weights)
    bool stochastic = false;    // gradients
    bool hadamard = false;      // the wgrad operands' random Hadamard transform
    std::uint64_t seed = 0;     // stochastic rounding's stream
};

// The largest magnitude of x as its quantization sees it (after the Hadamard transform where
// the layout has one): what the caller reduces over the ranks holding pieces of the tensor.
float nvfp4_tensor_amax(const float* x, std::int64_t rows, std::int64_t cols,
                        const Nvfp4Layout& layout);
// out = dequantize(quantize(x)) of a row-major [rows × cols] matrix whose whole tensor's
// largest magnitude is `tensor_amax` (nvfp4_tensor_amax, reduced). out may not alias x.
void fake_quantize_nvfp4(float* out, const float* x, std::int64_t rows, std::int64_t cols,
                         float tensor_amax, const Nvfp4Layout& layout);

// The normalised 16 × 16 Hadamard matrix with Transformer Engine-style fixed random signs
// (H · diag(signs) / 4): orthogonal, its own transpose's inverse. Row r, column c.
float nvfp4_hadamard(int r, int c);

} // namespace trident::kernels::cpu
