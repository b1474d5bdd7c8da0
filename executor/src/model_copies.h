#pragma once
// Parameters that two model chunks hold twice, kept equal by summing their gradients — the
// two-chunk schedules' part of the CPU trainer's gradient sums (host buffers).
// - V-shaped schedules (ZB-V, DualPipeV) put stage 0 and the last stage on pipeline rank 0,
//   so a tied word embedding and its head copy live on one rank: they add their gradients
//   there, with no embedding group (DeepSeek-V3 report §3.2.3 shares them physically).
// - DualPipe (DeepSeek-AI 2024, §3.2.1) holds two copies of a p-stage model: chunk 1 of rank r
//   is stage p − 1 − r of the second copy, whose twin is chunk 0 of rank p − 1 − r. The twins
//   swap chunk-1 gradients and add them into chunk 0, which the optimizer steps; chunk 1 then
//   takes its twin's updated chunk 0. Chunk 1's tensors are duplicates: out of the gradient
//   norm, the saved parameters and checkpoints' sources.
#include "trident/core/job.h"
#include "trident/executor/communicator.h"
#include "trident/executor/gpt_chunk.h"

#include <cstdint>

namespace trident::executor {

// V-shaped schedules: each tied word-embedding tensor on this rank takes the sum of them all.
void sum_tied_embedding_locally(const core::JobSpec& job, const ParameterStore& store,
                                float* grads);

// The contiguous flat ranges of a rank's two chunks in its store.
struct ChunkRanges {
    std::int64_t begin0 = 0, end0 = 0, begin1 = 0, end1 = 0;
};

// DualPipe's twin chunks of one pipeline rank, over the pipeline group.
class DualPipeTwins {
public:
    // `first_chunk1_tensor`: index in store.tensors of chunk 1's first tensor. Marks chunk 1's
    // tensors duplicates.
    DualPipeTwins(ParameterStore& store, std::size_t first_chunk1_tensor, Communicator& pipeline,
                  std::int64_t pipeline_rank, std::int64_t stages);
    // Chunk 0's gradients += the twin's chunk 1's (before the norm and the optimizer), in the
    // flat buffer or, `at`, in another buffer whose chunk ranges line up with the twin's (the
    // owned gradient slices of ZeRO-2/3: the twin's chunk 0 is sharded as this chunk 1).
    void sum_gradients(float* grads) { sum_gradients(grads, ranges_); }
    void sum_gradients(float* buffer, const ChunkRanges& at);
    // Chunk 1's values = the twin's chunk 0's (after the optimizer; full values on every rank).
    void copy_parameters(float* values);
    // Sends `send` to the twin and receives what it sent (pipeline messages after the schedule
    // walk has completed all of its).
    void swap_with_twin(const float* send, std::int64_t n_send, float* receive,
                        std::int64_t n_receive);

private:
    ChunkRanges ranges_;
    Communicator* pipeline_ = nullptr;
    int twin_ = 0;
};

} // namespace trident::executor
