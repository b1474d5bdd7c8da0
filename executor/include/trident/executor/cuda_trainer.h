#pragma once
// The CUDA backend's trainer (library trident::executor_cuda): the same Schedule walked action
// by action as CpuTrainer, on one GPU per rank, over CudaGptChunk (bf16 kernels from
// kernels/cuda, cuBLASLt GEMMs, flash attention) and NCCL communicators whose unique ids travel
// over the MPI process groups.
//
// Streams: the compute stream runs the kernels, the tensor-parallel collectives and the
// pipeline's sends and receives in schedule order; a second stream runs the data-parallel
// gradient all-reduce in buckets (gradient_buckets.h). With the plan's overlap_grad_reduce each
// bucket is launched as soon as the last micro-batch's weight-gradient work of its tensors is
// enqueued, so the reduction overlaps the rest of the backward pass; without it, after the
// schedule's last action. The distributed optimizer reduce-scatters once, after the walk. Mixed
// precision (Micikevicius et al. 2018): bf16 weights for the kernels, fp32 master weights, fp32
// gradient accumulation and fp32 Adam moments; the multi-tensor AdamW writes the bf16 copy as it
// updates. Activations come from a caching allocator on the compute stream; its peak is the step's
// peak activation memory.
#include "trident/executor/trainer.h"

#include <memory>

namespace trident::executor {

// Selects this rank's GPU (local rank on its node modulo the visible devices) and builds the
// trainer. Collective over the world (NCCL communicators). Throws SpecError for a job the CUDA
// backend does not run (require_supported_on_cuda).
std::unique_ptr<Trainer> make_cuda_trainer(const core::JobSpec& job, ProcessGroups& groups,
                                           std::uint64_t seed, SampleSource samples = {});

} // namespace trident::executor
