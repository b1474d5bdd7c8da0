#pragma once
// FP8 numerics on the CPU, as quantize → dequantize in fp32 (Micikevicius et al. 2022, "FP8
// Formats for Deep Learning"): the values an FP8 GEMM would see, for the executor's FP8
// recipes and as the reference a device FP8 path is tested against.
// E4M3 (OCP "FN": no infinities, max 448, subnormals down to 2^-9) for weights and
// activations; E5M2 (IEEE-like, max 57344, subnormals down to 2^-16) for gradients under the
// hybrid format. Rounding is to nearest, ties to even; out-of-range values saturate to ±max,
// as Transformer Engine's casts do; NaN stays NaN.
// Scales follow Transformer Engine: a value is stored as round(x · scale) with
// scale = max / amax (amax: the largest magnitude the scale covers), and read back as
// stored / scale.
#include <cstdint>

namespace trident::kernels::cpu {

enum class Fp8Kind { e4m3, e5m2 };

// The largest finite value of `kind` (448, 57344).
float fp8_max(Fp8Kind kind);
// x rounded to the nearest value of `kind` (saturating).
float fp8_round(float x, Fp8Kind kind);
// The largest |x| over n values (0 for none; NaN propagates).
float abs_max(const float* x, std::int64_t n);
// Walks the block_rows × block_cols blocks of a rows × cols row-major matrix (the last ones
// clipped) and calls f(r0, r1, c0, c1, amax) with each block's largest magnitude: what the
// blockwise FP8 recipe and NVFP4 scale by.
template <class F>
void for_each_block(const float* x, std::int64_t rows, std::int64_t cols, std::int64_t block_rows,
                    std::int64_t block_cols, F&& f) {
    for (std::int64_t r0 = 0; r0 < rows; r0 += block_rows)
        for (std::int64_t c0 = 0; c0 < cols; c0 += block_cols) {
            const std::int64_t r1 = r0 + block_rows < rows ? r0 + block_rows : rows;
            const std::int64_t c1 = c0 + block_cols < cols ? c0 + block_cols : cols;
            float amax = 0.0f;
            for (std::int64_t r = r0; r < r1; ++r) {
                const float m = abs_max(x + r * cols + c0, c1 - c0);
                amax = m > amax || m != m ? m : amax; // NaN stays NaN
            }
            f(r0, r1, c0, c1, amax);
        }
}
// The scale for amax (max / amax, at most FLT_MAX; 1 when amax is 0 or not finite: nothing
// to scale).
float fp8_scale(float amax, Fp8Kind kind);

// out[i] = fp8_round(x[i] · scale) / scale (out may be x).
void fake_quantize(float* out, const float* x, std::int64_t n, float scale, Fp8Kind kind);
// Blockwise scaling of a row-major [rows × cols] matrix (DeepSeek-V3 §3.3.1; Transformer
// Engine's Float8BlockScaling): each block of block_rows × block_cols (clipped at the edges)
// takes its own scale from its own amax. 1×128 for activations and gradients, 128×128 for
// weights.
void fake_quantize_blocks(float* out, const float* x, std::int64_t rows, std::int64_t cols,
                          std::int64_t block_rows, std::int64_t block_cols, Fp8Kind kind);

// MXFP8 (OCP Microscaling Formats v1.0; Transformer Engine's MXFP8BlockScaling): one E8M0
// scale, a power of two, per 32 consecutive values along the GEMM's contraction dimension —
// 1×32 blocks of a row when contracting over columns, 32×1 of a column when over rows — so a
// tensor read both ways is quantized twice, differently, as TE's rowwise and columnwise copies.
inline constexpr std::int64_t kMxBlock = 32;
// The decoding scale 2^e of a block whose largest magnitude is amax: e is log2(amax / max)
// rounded up (TE's float_to_e8m0, round toward +inf), so the block's largest value fits
// without saturating; e within E8M0's [-127, 127]; 1 when amax is 0 or not finite.
float mx_decode_scale(float amax, Fp8Kind kind);
void fake_quantize_mx(float* out, const float* x, std::int64_t rows, std::int64_t cols,
                      bool contract_rows, Fp8Kind kind);

} // namespace trident::kernels::cpu
