#include "model_copies.h"

#include "trident/core/internal_error.h"

#include <algorithm>
#include <vector>

namespace trident::executor {

void sum_tied_embedding_locally(const core::JobSpec& job, const ParameterStore& store,
                                float* grads) {
    if (!job.model.tied_embeddings) return;
    std::vector<const ParameterStore::Tensor*> tied;
    for (const auto& t : store.tensors)
        if (t.tied_embedding) tied.push_back(&t);
    if (tied.size() < 2) return; // only rank 0 holds both ends
    const std::int64_t n = tied.front()->size;
    for (const auto* t : tied)
        if (t->size != n)
            throw core::InternalError("tied embedding copies of " + std::to_string(n) + " and " +
                                      std::to_string(t->size) + " elements on one rank");
    std::vector<float> sum(std::size_t(n), 0.0f);
    for (const auto* t : tied)
        for (std::int64_t i = 0; i < n; ++i) sum[std::size_t(i)] += grads[t->offset + i];
    for (const auto* t : tied) std::copy(sum.begin(), sum.end(), grads + t->offset);
}

DualPipeTwins::DualPipeTwins(ParameterStore& store, std::size_t first_chunk1_tensor,
                             Communicator& pipeline, std::int64_t pipeline_rank,
                             std::int64_t stages)
    : pipeline_(&pipeline), twin_(int(stages - 1 - pipeline_rank)) {
    const auto& t = store.tensors;
    if (first_chunk1_tensor == 0 || first_chunk1_tensor >= t.size())
        throw core::InternalError("DualPipe: a rank needs two non-empty chunks");
    ranges_ = {t.front().offset,
               t[first_chunk1_tensor - 1].offset + t[first_chunk1_tensor - 1].size,
               t[first_chunk1_tensor].offset, t.back().offset + t.back().size};
    // Stage s is chunk 0 on rank s and chunk 1 on rank p − 1 − s: the same tensors in the
    // same order, so the twin's flat range lines up with this one element for element.
    for (std::size_t i = first_chunk1_tensor; i < t.size(); ++i) store.tensors[i].duplicate = true;
}

// Pipeline messages after the schedule walk has completed all of its: one tag suffices, and a
// send copies its buffer, so the region sent may be written once it is posted.
void DualPipeTwins::swap_with_twin(const float* send, std::int64_t n_send, float* receive,
                                   std::int64_t n_receive) {
    pipeline_->send(send, std::size_t(n_send), twin_, 0);
    pipeline_->recv(receive, std::size_t(n_receive), twin_, 0);
    pipeline_->wait_sends();
}

// This rank's chunk 1 is the twin's chunk 0 and the other way round: what one sends (its n1)
// is what the other receives (its n0).
void DualPipeTwins::sum_gradients(float* buffer, const ChunkRanges& at) {
    const std::int64_t n0 = at.end0 - at.begin0, n1 = at.end1 - at.begin1;
    std::vector<float> twin(static_cast<std::size_t>(n0));
    swap_with_twin(buffer + at.begin1, n1, twin.data(), n0);
    for (std::int64_t i = 0; i < n0; ++i) buffer[at.begin0 + i] += twin[std::size_t(i)];
}

void DualPipeTwins::copy_parameters(float* values) {
    swap_with_twin(values + ranges_.begin0, ranges_.end0 - ranges_.begin0, values + ranges_.begin1,
                   ranges_.end1 - ranges_.begin1);
}

} // namespace trident::executor
