// The linear layers' GEMMs of a chunk, in full precision or — in an FP8 layer — on operands
// quantized as an FP8 GEMM reads them (fp8_numerics.h): forward Q(x)·Q(W)ᵀ, input gradient
// Q(dy)·Q(W), weight gradient Q(dy)ᵀ·Q(x), each quantized along the GEMM's contraction
// dimension. The bias gradient is Σ dy in full precision, as Transformer Engine fuses it with
// the gradient's cast.
#include "fp8_numerics.h"
#include "trident/executor/gpt_chunk.h"
#include "trident/kernels/cpu.h"

namespace trident::executor {

namespace k = kernels::cpu;
using Operand = Fp8Numerics::Operand;

void GptChunk::gemm_forward(const LayerParams& lp, Linear which, std::int32_t expert, float* out,
                            const float* in, const float* w, const float* b, std::int64_t N,
                            std::int64_t C, std::int64_t OC) const {
    if (!fp8_ || !lp.fp8) return k::matmul_forward(out, in, w, b, N, C, OC);
    const Fp8Numerics::Site site{chunk_, lp.index, std::int32_t(which), expert};
    const Vec q_in = fp8_->quantized(site, Operand::input, in, N, C, false);
    const Vec q_w = fp8_->quantized(site, Operand::weight, w, OC, C, false);
    k::matmul_forward(out, q_in.data(), q_w.data(), b, N, C, OC);
}

void GptChunk::gemm_input_gradient(const LayerParams& lp, Linear which, std::int32_t expert,
                                   float* din, const float* dout, const float* w, std::int64_t N,
                                   std::int64_t C, std::int64_t OC) const {
    if (!fp8_ || !lp.fp8) return k::matmul_backward_input(din, dout, w, N, C, OC);
    const Fp8Numerics::Site site{chunk_, lp.index, std::int32_t(which), expert};
    const Vec q_dout = fp8_->quantized(site, Operand::gradient, dout, N, OC, false);
    const Vec q_w = fp8_->quantized(site, Operand::weight, w, OC, C, true);
    k::matmul_backward_input(din, q_dout.data(), q_w.data(), N, C, OC);
}

void GptChunk::gemm_weight_gradient(const LayerParams& lp, Linear which, std::int32_t expert,
                                    float* dw, float* db, const float* dout, const float* in,
                                    std::int64_t N, std::int64_t C, std::int64_t OC) const {
    if (!fp8_ || !lp.fp8) return k::matmul_backward_weight(dw, db, dout, in, N, C, OC);
    const Fp8Numerics::Site site{chunk_, lp.index, std::int32_t(which), expert};
    const Vec q_dout = fp8_->quantized(site, Operand::gradient, dout, N, OC, true);
    const Vec q_in = fp8_->quantized(site, Operand::input, in, N, C, true);
    k::matmul_backward_weight(dw, nullptr, q_dout.data(), q_in.data(), N, C, OC);
    if (db)
        for (std::int64_t n = 0; n < N; ++n)
            for (std::int64_t o = 0; o < OC; ++o) db[o] += dout[n * OC + o];
}

} // namespace trident::executor
