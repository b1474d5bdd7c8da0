#include "trident/simulator/flops.h"

#include "trident/simulator/layer_ops.h"

namespace trident::simulator {

namespace {

void add(StepFlops& total, const std::vector<Op>& ops) {
    for (const Op& op : ops) {
        const double f = op.flops * double(op.count);
        total.hardware += f;
        if (!op.recompute) total.model += f;
    }
}

} // namespace

StepFlops step_flops(const core::JobSpec& job) {
    StepFlops total;
    LayerView v = LayerView::global(job.training.global_batch_size, job.training.seq_length);
    const std::int64_t vocab = job.model.padded_vocab_size(job.plan.tp);
    for (std::int64_t layer = 0; layer < job.model.num_layers; ++layer) {
        v.recompute = job.layer_recompute(layer);
        add(total, layer_ops(job.model, v, layer));
    }
    v.recompute = core::RecomputeGranularity::none;
    add(total, embedding_ops(job.model, v, vocab));
    add(total, head_ops(job.model, v, vocab));
    return total;
}

} // namespace trident::simulator
