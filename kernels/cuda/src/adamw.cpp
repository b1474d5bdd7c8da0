// Host side of the multi-tensor AdamW and gradient norm: packs the tensors into launches of
// at most kMaxTensors tensors and kMaxBlocks chunks (adamw_batch.h).
#include "trident/kernels/cuda/adamw.h"

#include "adamw_batch.h"
#include "launch.h"

#include <cmath>
#include <cstdint>

namespace trident::kernels::cuda {
namespace {

using namespace detail;

// Walks the tensors, filling `batch` slot by slot and launching whenever the tensor slots or
// the block table are full; a tensor cut by a full table continues in the next launch.
template <typename Batch, typename Item, typename Fill, typename Launch>
void for_each_batch(std::span<const Item> items, Fill fill, Launch launch) {
    Batch batch{};
    int tensors = 0;
    int blocks = 0;
    for (const Item& item : items) {
        if (item.numel <= 0) continue;
        int slot = tensors++;
        fill(batch, slot, item);
        const std::int64_t chunks = ceil_div(item.numel, kChunk);
        for (std::int64_t c = 0; c < chunks; ++c) {
            batch.table.tensor[blocks] = static_cast<unsigned char>(slot);
            batch.table.chunk[blocks] = static_cast<int>(c);
            if (++blocks == kMaxBlocks) {
                launch(batch, blocks);
                blocks = 0;
                tensors = 0;
                if (c + 1 < chunks) {
                    slot = tensors++;
                    fill(batch, slot, item);
                }
            }
        }
        if (tensors == kMaxTensors) {
            if (blocks > 0) launch(batch, blocks);
            blocks = 0;
            tensors = 0;
        }
    }
    if (blocks > 0) launch(batch, blocks);
}

} // namespace

void adamw_step(std::span<const AdamWTensor> tensors, const AdamWConfig& config,
                cudaStream_t stream) {
    require(config.step >= 1, "adamw_step", "step counts from 1");
    const AdamWScalars s{config.lr,
                         config.beta1,
                         config.beta2,
                         config.eps,
                         config.weight_decay,
                         config.grad_scale,
                         1.0f - std::pow(config.beta1, static_cast<float>(config.step)),
                         1.0f - std::pow(config.beta2, static_cast<float>(config.step))};
    for_each_batch<AdamWBatch>(
        tensors,
        [](AdamWBatch& b, int slot, const AdamWTensor& t) {
            b.param[slot] = t.param;
            b.grad[slot] = t.grad;
            b.m[slot] = t.exp_avg;
            b.v[slot] = t.exp_avg_sq;
            b.copy[slot] = t.param_bf16;
            b.numel[slot] = t.numel;
            b.vector[slot] = aligned16(t.param, t.grad, t.exp_avg, t.exp_avg_sq) &&
                             reinterpret_cast<std::uintptr_t>(t.param_bf16) % 8 == 0;
        },
        [&](const AdamWBatch& b, int blocks) { launch_adamw(b, blocks, s, stream); });
}

void gradient_squared_norm(float* out, std::span<const GradientView> grads, cudaStream_t stream) {
    for_each_batch<NormBatch>(
        grads,
        [](NormBatch& b, int slot, const GradientView& g) {
            b.grad[slot] = g.data;
            b.numel[slot] = g.numel;
            b.vector[slot] = aligned16(g.data);
        },
        [&](const NormBatch& b, int blocks) { launch_squared_norm(b, blocks, out, stream); });
}

} // namespace trident::kernels::cuda
