#pragma once
// The sums both backends make after the schedule walk, written once against Communicator (MPI
// host buffers or NCCL device buffers alike).
#include "trident/core/job.h"
#include "trident/executor/communicator.h"
#include "trident/executor/gpt_chunk.h"

namespace trident::executor {

// Gradients each rank holds only a part of, summed in place in `grads` (the flat buffer of
// `store`): a tied word embedding held on the first and the last stage takes the sum of both
// copies' gradients over `embedding` (null on ranks of no such pair); under sequence
// parallelism each tensor rank holds the norms' gradients of its own rows, summed over
// `tensor`. Before a reduce-scatter over the data ranks (whose shards do not line up with
// these tensors) or after bucketed all-reduces (which these commute with).
void sum_partial_gradients(const core::JobSpec& job, const ParameterStore& store, float* grads,
                           Communicator* embedding, Communicator& tensor);
// Its two halves. Whether `t` is a tied word-embedding copy summed with another stage's (or,
// under a V-shaped schedule, another chunk's): pp > 1.
bool summed_across_stages(const core::JobSpec& job, const ParameterStore::Tensor& t);
void sum_tied_embedding_gradients(const core::JobSpec& job, const ParameterStore& store,
                                  float* grads, Communicator* embedding);
// The tensor-partial sums of store.tensors[first, end) only (ZeRO-2/3 reduce each chunk's
// gradients every micro-batch).
void sum_tensor_partial_gradients(const core::JobSpec& job, const ParameterStore& store,
                                  float* grads, Communicator& tensor, std::size_t first,
                                  std::size_t end);

// The step's mean loss on every rank: the last stage's tensor rank 0 of every data rank
// contributes `microbatch_mean` (its micro-batches' mean loss) over dp, summed over `world`.
// (Context ranks' losses are already shares of their micro-batch's mean.)
double step_loss(double microbatch_mean, bool last_stage, std::int64_t tp_rank, std::int64_t dp,
                 Communicator& world);

} // namespace trident::executor
