#include "trident/simulator/flops.h"

#include "trident/simulator/layer_ops.h"

#include <map>

namespace trident::simulator {

namespace {

StepFlops of(const std::vector<Op>& ops) {
    StepFlops total;
    for (const Op& op : ops) {
        const double f = op.flops * double(op.count);
        total.hardware += f;
        if (!op.recompute) total.model += f;
    }
    return total;
}

void add(StepFlops& total, const StepFlops& more) {
    total.hardware += more.hardware;
    total.model += more.model;
}

// The FLOPs of the operations the job runs: with a capacity factor, of the copies its experts
// compute (padded, or capped with the rest dropped).
StepFlops operation_flops(const core::JobSpec& job) {
    StepFlops total;
    LayerView v = LayerView::global(job.training.global_batch_size, job.training.seq_length);
    v.recompute_modules = job.plan.recompute.modules;
    const std::int64_t vocab = job.model.padded_vocab_size(job.plan.tp);
    const core::PipelineSplit split = job.pipeline_split();
    // Layers differ only by being MoE or dense and by their recomputation: each kind once.
    std::map<std::pair<bool, int>, StepFlops> kinds;
    for (std::int64_t layer = 0; layer < job.model.num_layers; ++layer) {
        v.recompute = job.recompute_at(split.position(layer));
        const auto key = std::make_pair(job.model.is_moe_layer(layer), v.recompute_key());
        auto it = kinds.find(key);
        if (it == kinds.end()) it = kinds.emplace(key, of(layer_ops(job.model, v, layer))).first;
        add(total, it->second);
    }
    v.recompute = core::RecomputeGranularity::none;
    add(total, of(embedding_ops(job.model, v, vocab)));
    add(total, of(head_ops(job.model, v, vocab)));
    // Multi-token prediction: Megatron counts its layers, projections and logits as model FLOPs.
    for (std::int64_t d = 0; d < job.model.mtp_num_layers; ++d)
        add(total, of(mtp_ops(job.model, mtp_view(job, v, d), vocab, d)));
    return total;
}

} // namespace

StepFlops step_flops(const core::JobSpec& job) {
    if (!job.model.moe || !job.model.moe->capacity_factor) return operation_flops(job);
    // Model FLOPs count every token's top-k expert copies, as Megatron's formula does: what a
    // capacity factor pads is work the hardware does (HFU), what it drops is not done.
    core::JobSpec nominal = job;
    nominal.model.moe->capacity_factor.reset();
    nominal.model.moe->pad_to_capacity = false;
    return {.model = operation_flops(nominal).model, .hardware = operation_flops(job).hardware};
}

} // namespace trident::simulator
