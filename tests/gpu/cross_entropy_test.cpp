// Softmax cross-entropy, single shard and vocabulary-parallel over two simulated tensor ranks,
// against a double-precision loop on the CPU.
#include "gpu_test_support.h"
#include "trident/kernels/cuda/cross_entropy.h"

#include <algorithm>

namespace trident::kernels::cuda::testing {
namespace {

struct CrossEntropyReference {
    std::vector<double> loss, grad;
};

CrossEntropyReference cross_entropy_reference(const std::vector<double>& logits,
                                              const std::vector<std::int32_t>& targets,
                                              std::int64_t rows, std::int64_t vocab, double scale) {
    CrossEntropyReference r{std::vector<double>(rows, 0.0), std::vector<double>(rows * vocab, 0.0)};
    for (std::int64_t i = 0; i < rows; ++i) {
        if (targets[i] < 0) continue;
        const double* x = &logits[i * vocab];
        const double m = *std::max_element(x, x + vocab);
        double s = 0.0;
        for (std::int64_t v = 0; v < vocab; ++v) s += std::exp(x[v] - m);
        r.loss[i] = std::log(s) + m - x[targets[i]];
        for (std::int64_t v = 0; v < vocab; ++v)
            r.grad[i * vocab + v] =
                (std::exp(x[v] - m) / s - (v == targets[i] ? 1.0 : 0.0)) * scale;
    }
    return r;
}

std::vector<std::int32_t> random_targets(std::int64_t rows, std::int64_t vocab) {
    std::mt19937 gen(7);
    std::uniform_int_distribution<std::int32_t> dist(0, static_cast<std::int32_t>(vocab - 1));
    std::vector<std::int32_t> t(rows);
    for (auto& x : t) x = dist(gen);
    t[3] = -1; // an ignored position
    return t;
}

template <typename T>
void check_single_shard(std::int64_t rows, std::int64_t vocab) {
    const auto logits = convert<T>(random_floats(rows * vocab, 31, 3.0f));
    const auto targets = random_targets(rows, vocab);
    const double scale = 1.0 / rows;
    DeviceBuffer<T> dlogits(logits);
    DeviceBuffer<std::int32_t> dtargets(targets);
    DeviceBuffer<float> dloss(rows);
    dloss.fill_bytes(0xFF);
    cross_entropy_forward_backward<T>(dloss.get(), dlogits.get(), dtargets.get(), rows, vocab,
                                      static_cast<float>(scale), nullptr);
    TRIDENT_CUDA_CHECK(cudaDeviceSynchronize());
    const auto ref = cross_entropy_reference(widen(logits), targets, rows, vocab, scale);
    EXPECT_LT(relative_error(dloss.to_host(), ref.loss), 1e-5) << "loss";
    EXPECT_LT(relative_error(dlogits.to_host(), ref.grad), tolerance<T>()) << "gradient";
}

// Two ranks each hold half the vocabulary; the all-reduces are done on the host.
template <typename T>
void check_vocab_parallel(std::int64_t rows, std::int64_t vocab) {
    const std::int64_t local = vocab / 2;
    const auto logits = convert<T>(random_floats(rows * vocab, 41, 3.0f));
    const auto targets = random_targets(rows, vocab);
    const double scale = 0.5;
    DeviceBuffer<std::int32_t> dtargets(targets);
    std::vector<DeviceBuffer<T>> shard;
    std::vector<DeviceBuffer<float>> max_d, sum_d, tgt_d;
    for (int rank = 0; rank < 2; ++rank) {
        std::vector<T> part(rows * local);
        for (std::int64_t i = 0; i < rows; ++i)
            std::copy_n(&logits[i * vocab + rank * local], local, &part[i * local]);
        shard.emplace_back(part);
        max_d.emplace_back(rows);
        sum_d.emplace_back(rows);
        tgt_d.emplace_back(rows);
        cross_entropy_partials<T>(max_d[rank].get(), sum_d[rank].get(), tgt_d[rank].get(),
                                  shard[rank].get(), dtargets.get(), rows, local, rank * local,
                                  nullptr);
    }
    // all-reduce MAX of the row maxima, rescale each rank's sums, all-reduce SUM.
    std::vector<float> global_max(rows), global_sum(rows, 0.0f), global_tgt(rows, 0.0f);
    const auto m0 = max_d[0].to_host(), m1 = max_d[1].to_host();
    for (std::int64_t i = 0; i < rows; ++i) global_max[i] = std::max(m0[i], m1[i]);
    DeviceBuffer<float> gmax(global_max);
    for (int rank = 0; rank < 2; ++rank) {
        cross_entropy_rescale_sumexp(sum_d[rank].get(), max_d[rank].get(), gmax.get(), rows,
                                     nullptr);
        const auto s = sum_d[rank].to_host();
        const auto t = tgt_d[rank].to_host();
        for (std::int64_t i = 0; i < rows; ++i) {
            global_sum[i] += s[i];
            global_tgt[i] += t[i];
        }
    }
    DeviceBuffer<float> gsum(global_sum), gtgt(global_tgt);
    const auto ref = cross_entropy_reference(widen(logits), targets, rows, vocab, scale);
    for (int rank = 0; rank < 2; ++rank) {
        DeviceBuffer<float> dloss(rows);
        cross_entropy_loss_and_grad<T>(dloss.get(), shard[rank].get(), dtargets.get(), gmax.get(),
                                       gsum.get(), gtgt.get(), rows, local, rank * local,
                                       static_cast<float>(scale), nullptr);
        TRIDENT_CUDA_CHECK(cudaDeviceSynchronize());
        EXPECT_LT(relative_error(dloss.to_host(), ref.loss), 1e-5) << "loss on rank " << rank;
        const auto grad = shard[rank].to_host();
        std::vector<double> grad_ref(rows * local);
        for (std::int64_t i = 0; i < rows; ++i)
            for (std::int64_t v = 0; v < local; ++v)
                grad_ref[i * local + v] = ref.grad[i * vocab + rank * local + v];
        EXPECT_LT(relative_error(grad, grad_ref), tolerance<T>()) << "gradient on rank " << rank;
    }
}

class CrossEntropyTest : public GpuTest {};

TEST_F(CrossEntropyTest, SingleShardBf16) {
    check_single_shard<bf16>(37, 1000);
}
TEST_F(CrossEntropyTest, SingleShardBf16LargeVocab) {
    check_single_shard<bf16>(8, 50304);
}
TEST_F(CrossEntropyTest, SingleShardFp32OddVocab) {
    check_single_shard<float>(19, 333);
}
TEST_F(CrossEntropyTest, VocabParallelBf16) {
    check_vocab_parallel<bf16>(29, 2048);
}
TEST_F(CrossEntropyTest, VocabParallelFp32OddShard) {
    check_vocab_parallel<float>(13, 318);
}

} // namespace
} // namespace trident::kernels::cuda::testing
