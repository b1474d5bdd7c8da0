#include "partial_sums.h"

namespace trident::executor {

void sum_partial_gradients(const core::JobSpec& job, const ParameterStore& store, float* grads,
                           Communicator* embedding, Communicator& tensor) {
    if (embedding && job.model.tied_embeddings && job.plan.pp > 1)
        for (const auto& t : store.tensors)
            if (t.tied_embedding) embedding->all_reduce_sum(grads + t.offset, std::size_t(t.size));
    if (tensor.size() > 1)
        for (const auto& t : store.tensors)
            if (t.tensor_partial || (job.plan.sequence_parallel && t.sequence_partial))
                tensor.all_reduce_sum(grads + t.offset, std::size_t(t.size));
}

double step_loss(double microbatch_mean, bool last_stage, std::int64_t tp_rank, std::int64_t dp,
                 Communicator& world) {
    float contribution = 0.0f;
    if (last_stage && tp_rank == 0) contribution = float(microbatch_mean / double(dp));
    world.all_reduce_sum(&contribution, 1);
    return contribution;
}

} // namespace trident::executor
