// Bias+GeLU and SwiGLU against double-precision loops on the CPU.
#include "gpu_test_support.h"
#include "trident/kernels/cuda/activation.h"

namespace trident::kernels::cuda::testing {
namespace {

double gelu_ref(double x) {
    const double k = std::sqrt(2.0 / M_PI);
    return 0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x)));
}
double gelu_grad_ref(double x) {
    const double k = std::sqrt(2.0 / M_PI);
    const double t = std::tanh(k * (x + 0.044715 * x * x * x));
    return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * k * (1.0 + 3.0 * 0.044715 * x * x);
}
double sigmoid_ref(double x) {
    return 1.0 / (1.0 + std::exp(-x));
}

template <typename T>
void check_bias_gelu(std::int64_t rows, std::int64_t cols) {
    const std::size_t n = rows * cols;
    const auto in = convert<T>(random_floats(n, 11, 1.5f));
    const auto bias = convert<T>(random_floats(cols, 12, 0.5f));
    const auto dout = convert<T>(random_floats(n, 13));
    const std::vector<float> dbias0(cols, 1.0f);
    DeviceBuffer<T> din(in), dbias_in(bias), ddout(dout), dout_act(n), dgrad(n);
    DeviceBuffer<float> ddbias(dbias0);
    dout_act.fill_bytes(0xFF);
    dgrad.fill_bytes(0xFF);
    bias_gelu_forward<T>(dout_act.get(), din.get(), dbias_in.get(), rows, cols, nullptr);
    bias_gelu_backward<T>(dgrad.get(), ddbias.get(), ddout.get(), din.get(), dbias_in.get(), rows,
                          cols, nullptr);
    TRIDENT_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<double> out_ref(n), din_ref(n), dbias_ref(cols);
    for (std::int64_t c = 0; c < cols; ++c) dbias_ref[c] = dbias0[c];
    for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t c = 0; c < cols; ++c) {
            const double x = double(to_float(in[r * cols + c])) + to_float(bias[c]);
            out_ref[r * cols + c] = gelu_ref(x);
            din_ref[r * cols + c] = to_float(dout[r * cols + c]) * gelu_grad_ref(x);
            dbias_ref[c] += din_ref[r * cols + c];
        }
    EXPECT_LT(relative_error(dout_act.to_host(), out_ref), tolerance<T>()) << "forward";
    EXPECT_LT(relative_error(dgrad.to_host(), din_ref), tolerance<T>()) << "din";
    EXPECT_LT(relative_error(ddbias.to_host(), dbias_ref), 1e-4) << "dbias (accumulated)";
}

template <typename T>
void check_swiglu(std::int64_t rows, std::int64_t ffn) {
    const auto in = convert<T>(random_floats(rows * 2 * ffn, 21, 1.5f));
    const auto dout = convert<T>(random_floats(rows * ffn, 22));
    DeviceBuffer<T> din(in), ddout(dout), dout_act(rows * ffn), dgrad(rows * 2 * ffn);
    dout_act.fill_bytes(0xFF);
    dgrad.fill_bytes(0xFF);
    swiglu_forward<T>(dout_act.get(), din.get(), rows, ffn, nullptr);
    swiglu_backward<T>(dgrad.get(), ddout.get(), din.get(), rows, ffn, nullptr);
    TRIDENT_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<double> out_ref(rows * ffn), din_ref(rows * 2 * ffn);
    for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t f = 0; f < ffn; ++f) {
            const double g = to_float(in[r * 2 * ffn + f]);
            const double u = to_float(in[r * 2 * ffn + ffn + f]);
            const double d = to_float(dout[r * ffn + f]);
            const double s = sigmoid_ref(g);
            out_ref[r * ffn + f] = g * s * u;
            din_ref[r * 2 * ffn + f] = d * u * s * (1.0 + g * (1.0 - s));
            din_ref[r * 2 * ffn + ffn + f] = d * g * s;
        }
    EXPECT_LT(relative_error(dout_act.to_host(), out_ref), tolerance<T>()) << "forward";
    EXPECT_LT(relative_error(dgrad.to_host(), din_ref), tolerance<T>()) << "backward";
}

class ActivationTest : public GpuTest {};

TEST_F(ActivationTest, BiasGeluBf16) {
    check_bias_gelu<bf16>(300, 512);
}
TEST_F(ActivationTest, BiasGeluBf16ManyRows) {
    check_bias_gelu<bf16>(4099, 264);
}
TEST_F(ActivationTest, BiasGeluFp32OddWidth) {
    check_bias_gelu<float>(77, 99);
}
TEST_F(ActivationTest, SwigluBf16) {
    check_swiglu<bf16>(123, 688);
}
TEST_F(ActivationTest, SwigluFp32OddWidth) {
    check_swiglu<float>(31, 45);
}

} // namespace
} // namespace trident::kernels::cuda::testing
