#include "partial_sums.h"

#include <algorithm>

namespace trident::executor {

bool summed_across_stages(const core::JobSpec& job, const ParameterStore::Tensor& t) {
    // Tied to the head, or the word embedding and the copy MTP reads on the last stage.
    return t.tied_embedding && job.plan.pp > 1;
}

void sum_tied_embedding_gradients(const core::JobSpec& job, const ParameterStore& store,
                                  float* grads, Communicator* embedding) {
    if (embedding)
        for (const auto& t : store.tensors)
            if (summed_across_stages(job, t))
                embedding->all_reduce_sum(grads + t.offset, std::size_t(t.size));
}

void sum_tensor_partial_gradients(const core::JobSpec& job, const ParameterStore& store,
                                  float* grads, Communicator& tensor, std::size_t first,
                                  std::size_t end) {
    if (tensor.size() == 1) return;
    for (std::size_t i = first; i < std::min(end, store.tensors.size()); ++i) {
        const auto& t = store.tensors[i];
        if (t.tensor_partial || (job.plan.sequence_parallel && t.sequence_partial))
            tensor.all_reduce_sum(grads + t.offset, std::size_t(t.size));
    }
}

void sum_partial_gradients(const core::JobSpec& job, const ParameterStore& store, float* grads,
                           Communicator* embedding, Communicator& tensor) {
    sum_tied_embedding_gradients(job, store, grads, embedding);
    sum_tensor_partial_gradients(job, store, grads, tensor, 0, store.tensors.size());
}

double step_loss(double microbatch_mean, bool last_stage, std::int64_t tp_rank, std::int64_t dp,
                 Communicator& world) {
    float contribution = 0.0f;
    if (last_stage && tp_rank == 0) contribution = float(microbatch_mean / double(dp));
    world.all_reduce_sum(&contribution, 1);
    return contribution;
}

} // namespace trident::executor
