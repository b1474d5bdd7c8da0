#pragma once
// Buckets of the flat gradient buffer for data-parallel reduction that overlaps the backward
// pass (PyTorch DDP, Li et al. 2020; Megatron-LM's DistributedDataParallel): tensors are
// grouped, in the reverse of their order in the buffer — the order the backward pass finishes
// them — into contiguous ranges of about `bucket_elements`; a bucket's all-reduce may start
// as soon as every tensor in it has received its last gradient contribution of the step.
//
// Pure bookkeeping, no communication: the CUDA trainer marks tensors final as the last
// micro-batch's weight-gradient work for them is enqueued, and launches each bucket that
// mark_final() reports on its data-parallel stream.
#include "trident/executor/gpt_chunk.h"

#include <cstdint>
#include <functional>
#include <vector>

namespace trident::executor {

class GradientBuckets {
public:
    struct Bucket {
        std::int64_t begin = 0, end = 0; // element range of the flat buffer
        std::int32_t tensors = 0;        // how many tensors it covers
    };
    // Buckets over the tensors of `store` that `include` accepts (all when empty); each bucket
    // is a contiguous run of accepted tensors, closed once it holds `bucket_elements` or more,
    // or where an excluded tensor interrupts the run. A tensor is never split.
    GradientBuckets(const ParameterStore& store, std::int64_t bucket_elements,
                    std::function<bool(const ParameterStore::Tensor&)> include = {});

    const std::vector<Bucket>& buckets() const { return buckets_; }
    // The bucket holding tensor `index` of the store, or -1 when it is not bucketed.
    std::int32_t bucket_of(std::size_t tensor_index) const { return bucket_of_[tensor_index]; }

    // Start of a step: every bucket waits for all of its tensors again.
    void reset();
    // Tensor `index` has its final gradient for this step. Returns the bucket that became
    // complete with it (-1: none). Marking a tensor twice in a step is a logic error
    // (core::InternalError), as is marking one that is not bucketed.
    std::int32_t mark_final(std::size_t tensor_index);
    // Buckets not yet complete this step (the caller reduces them at the end of the step).
    std::vector<std::int32_t> incomplete() const;

private:
    std::vector<Bucket> buckets_;
    std::vector<std::int32_t> bucket_of_; // per tensor of the store
    std::vector<std::int32_t> waiting_;   // per bucket: tensors still to come this step
    std::vector<char> marked_;            // per tensor, this step
};

} // namespace trident::executor
