// Linear layers through the BLAS (sgemm). OpenBLAS reaches about 150 GFLOP/s on one core of
// this machine (`trident profile --backend cpu`); hand-blocked loops on this class of CPU reach
// a small fraction of that, so the executor uses the BLAS.
#include "trident/kernels/cpu.h"

#include <cblas.h>

namespace trident::kernels::cpu {

void matmul_forward(float* out, const float* inp, const float* weight, const float* bias,
                    std::int64_t N, std::int64_t C, std::int64_t OC) {
    float beta = 0.0f;
    if (bias) {
        for (std::int64_t n = 0; n < N; ++n)
            for (std::int64_t o = 0; o < OC; ++o) out[n * OC + o] = bias[o];
        beta = 1.0f;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(N), int(OC), int(C), 1.0f, inp, int(C),
                weight, int(C), beta, out, int(OC));
}

void matmul_backward_input(float* dinp, const float* dout, const float* weight, std::int64_t N,
                           std::int64_t C, std::int64_t OC) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(N), int(C), int(OC), 1.0f, dout,
                int(OC), weight, int(C), 1.0f, dinp, int(C));
}

void matmul_backward_weight(float* dweight, float* dbias, const float* dout, const float* inp,
                            std::int64_t N, std::int64_t C, std::int64_t OC) {
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, int(OC), int(C), int(N), 1.0f, dout,
                int(OC), inp, int(C), 1.0f, dweight, int(C));
    if (dbias)
        for (std::int64_t n = 0; n < N; ++n)
            for (std::int64_t o = 0; o < OC; ++o) dbias[o] += dout[n * OC + o];
}

} // namespace trident::kernels::cpu
