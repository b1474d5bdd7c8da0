// FP8 operands and GEMMs on the device against the CPU FP8 reference (kernels/cpu fp8.h, the
// executor's FP8 numerics): the amax, the tensorwise scale, the saturating round-to-nearest-
// even cast (plain and transposed), and cuBLASLt's forward, dgrad and wgrad over those
// operands against double-precision products of the CPU's quantize → dequantize values.
#include "gpu_test_support.h"
#include "trident/kernels/cuda/error.h"
#include "trident/kernels/cuda/fp8.h"
#include "trident/kernels/cuda/gemm.h"
#include "trident/kernels/fp8.h"

#include <cstdint>

namespace trident::kernels::cuda::testing {
namespace {

namespace ref = trident::kernels::cpu;

class Fp8GemmTest : public GpuTest {};

// An FP8 byte's value (OCP: E4M3 "FN" with bias 7 and no infinities, E5M2 with bias 15).
float decode(std::uint8_t byte, Fp8Type type) {
    const bool e4m3 = type == Fp8Type::e4m3;
    const int mantissa_bits = e4m3 ? 3 : 2, bias = e4m3 ? 7 : 15;
    const int exponent = (byte & 0x7F) >> mantissa_bits,
              mantissa = byte & ((1 << mantissa_bits) - 1);
    const float magnitude =
        exponent == 0
            ? std::ldexp(float(mantissa), 1 - bias - mantissa_bits)
            : std::ldexp(1.0f + float(mantissa) / float(1 << mantissa_bits), exponent - bias);
    return byte & 0x80 ? -magnitude : magnitude;
}

ref::Fp8Kind kind_of(Fp8Type t) {
    return t == Fp8Type::e4m3 ? ref::Fp8Kind::e4m3 : ref::Fp8Kind::e5m2;
}

// A bf16 tensor on the device quantized tensorwise: its bytes (transposed or not), its scale
// and 1/scale on the device, and the CPU's dequantised values (row-major, untransposed).
struct Quantized {
    DeviceBuffer<std::uint8_t> bytes;
    DeviceBuffer<float> scale_inv;
    std::vector<float> reference;
};

Quantized quantize_on_device(const std::vector<bf16>& x, std::int64_t rows, std::int64_t cols,
                             bool transpose, Fp8Type type) {
    DeviceBuffer<bf16> dx(x);
    DeviceBuffer<float> amax_d(std::vector<float>{0.0f}), scale(1);
    Quantized q{DeviceBuffer<std::uint8_t>(rows * cols), DeviceBuffer<float>(1), {}};
    amax(amax_d.get(), dx.get(), rows * cols, nullptr);
    scale_from_amax(scale.get(), q.scale_inv.get(), amax_d.get(), type, nullptr);
    quantize(q.bytes.get(), dx.get(), rows, cols, transpose, scale.get(), type, nullptr);
    TRIDENT_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<float> host(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) host[i] = to_float(x[i]);
    const ref::Fp8Kind kind = kind_of(type);
    const float s = ref::fp8_scale(ref::abs_max(host.data(), rows * cols), kind);
    q.reference.resize(host.size());
    ref::fake_quantize(q.reference.data(), host.data(), rows * cols, s, kind);
    return q;
}

TEST_F(Fp8GemmTest, CastMatchesTheCpuReferenceBitForBit) {
    constexpr std::int64_t rows = 48, cols = 80;
    const auto x = convert<bf16>(random_floats(rows * cols, 91, 3.0f));
    for (Fp8Type type : {Fp8Type::e4m3, Fp8Type::e5m2})
        for (bool transpose : {false, true}) {
            Quantized q = quantize_on_device(x, rows, cols, transpose, type);
            const std::vector<std::uint8_t> bytes = q.bytes.to_host();
            const float scale_inv = q.scale_inv.to_host()[0];
            for (std::int64_t r = 0; r < rows; ++r)
                for (std::int64_t c = 0; c < cols; ++c) {
                    const std::uint8_t b = bytes[transpose ? c * rows + r : r * cols + c];
                    ASSERT_FLOAT_EQ(decode(b, type) * scale_inv, q.reference[r * cols + c])
                        << r << "," << c << (transpose ? " transposed" : "");
                }
        }
}

TEST_F(Fp8GemmTest, ForwardDgradWgradMatchTheQuantizedProducts) {
    constexpr std::int64_t N = 64, C = 96, OC = 48; // multiples of 16, as the FP8 kernels want
    const auto x = convert<bf16>(random_floats(N * C, 81));
    const auto w = convert<bf16>(random_floats(OC * C, 82, 0.05f));
    const auto dy = convert<bf16>(random_floats(N * OC, 83, 1e-3f));
    LtGemm gemm;
    DeviceBuffer<float> y(N * OC), dx(N * C), dw(OC * C);
    Quantized qx = quantize_on_device(x, N, C, false, Fp8Type::e4m3);
    Quantized qw = quantize_on_device(w, OC, C, false, Fp8Type::e4m3);
    Quantized qdy = quantize_on_device(dy, N, OC, false, Fp8Type::e5m2);
    Quantized qw_t = quantize_on_device(w, OC, C, true, Fp8Type::e4m3);
    Quantized qdy_t = quantize_on_device(dy, N, OC, true, Fp8Type::e5m2);
    Quantized qx_t = quantize_on_device(x, N, C, true, Fp8Type::e4m3);
    gemm.forward_fp8(y.get(), qx.bytes.get(), Fp8Type::e4m3, qx.scale_inv.get(), qw.bytes.get(),
                     Fp8Type::e4m3, qw.scale_inv.get(), N, C, OC, 0.0f, nullptr);
    gemm.dgrad_fp8(dx.get(), qdy.bytes.get(), Fp8Type::e5m2, qdy.scale_inv.get(), qw_t.bytes.get(),
                   Fp8Type::e4m3, qw_t.scale_inv.get(), N, C, OC, 0.0f, nullptr);
    gemm.wgrad_fp8(dw.get(), qdy_t.bytes.get(), Fp8Type::e5m2, qdy_t.scale_inv.get(),
                   qx_t.bytes.get(), Fp8Type::e4m3, qx_t.scale_inv.get(), N, C, OC, 0.0f, nullptr);
    TRIDENT_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<double> y_ref(N * OC, 0.0), dx_ref(N * C, 0.0), dw_ref(OC * C, 0.0);
    const auto& X = qx.reference;
    const auto& W = qw.reference;
    const auto& DY = qdy.reference;
    for (std::int64_t n = 0; n < N; ++n)
        for (std::int64_t o = 0; o < OC; ++o)
            for (std::int64_t c = 0; c < C; ++c) {
                y_ref[n * OC + o] += double(X[n * C + c]) * W[o * C + c];
                dx_ref[n * C + c] += double(DY[n * OC + o]) * W[o * C + c];
                dw_ref[o * C + c] += double(DY[n * OC + o]) * X[n * C + c];
            }
    // Exact operands on both sides: only the fp32 accumulation order differs.
    EXPECT_LT(relative_error(y.to_host(), y_ref), 1e-5);
    EXPECT_LT(relative_error(dx.to_host(), dx_ref), 1e-5);
    EXPECT_LT(relative_error(dw.to_host(), dw_ref), 1e-5);
}

} // namespace
} // namespace trident::kernels::cuda::testing
