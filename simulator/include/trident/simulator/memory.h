#pragma once
// Memory per rank, per pipeline stage: weights, gradients and optimizer state (Megatron-LM's
// theoretical_memory_usage accounting, per component so uneven stages and experts come out
// right), activations (Korthikanti et al. 2022, generalised to GQA, SwiGLU, MoE and MLA) times
// the micro-batches the schedule keeps in flight on that stage, and communication buffers.
// Reported per stage, never averaged: the first stage usually holds the most.
#include "trident/core/job.h"
#include "trident/core/model_layout.h"
#include "trident/core/schedule.h"
#include "trident/simulator/layer_ops.h"

#include <vector>

namespace trident::simulator {

// Activation bytes one micro-batch leaves stored in layer `layer` until its backward
// (activations in the parameters' dtype — Korthikanti et al. count 16-bit ones — and 1-byte
// dropout masks). Flash attention (v.flash_attention) drops the s² score
// tensors (Dao 2022); without it this is Korthikanti et al.'s Table 2.
double activation_bytes(const core::ModelSpec& m, const LayerView& v, std::int64_t layer);
// What a weight-gradient pass still needs after B has run — the linear layers' inputs and
// their output gradients — held until W by zero-bubble schedules.
double weight_gradient_state_bytes(const core::ModelSpec& m, const LayerView& v,
                                   std::int64_t layer);
// What the backward of one micro-batch holds beyond activation_bytes while it works on layer
// `layer`, at worst: the gradients its MLP's backward makes before their weight gradients
// (fewer when W is fused into the backward, each GEMM's W freeing what it read) and, under
// recomputation, what the layer's forward rebuilt just before its backward — a fully
// recomputed layer's activations, or the score state selective recomputation rebuilds.
double backward_working_bytes(const core::ModelSpec& m, const LayerView& v, std::int64_t layer,
                              bool fused);

struct StageParameters {
    double dense = 0.0;  // parameters on one rank of this stage, replicated over dp·cp
    double expert = 0.0; // routed-expert parameters, replicated over expert-dp
    double fp8 = 0.0;    // of those, the weights of linear layers that run in FP8
    // Each model chunk's FSDP units in forward order (core::ChunkLayout::units).
    std::vector<std::vector<core::ShardUnit>> units;
    double total() const { return dense + expert; }
    // The parameters of model chunk `chunk` (the sum of its units).
    double chunk_total(std::size_t chunk) const;
    // The unit with the most parameters (what ZeRO-3 holds gathered at once).
    core::ShardUnit largest_unit() const;
};
// What the FP8 copies of a stage's weights add on one rank: the FP8 weight and its transpose
// (2 bytes per FP8 parameter) beside the 16-bit weight, or — with the FP8 parameter gather,
// where the FP8 weight is the parameter — nothing beyond the 16-bit bytes already counted
// (1-byte weight + 1-byte transpose in place of 2 bytes).
double fp8_weight_copy_bytes(double fp8_parameters, const core::Fp8& fp8);
// The bytes of `parameters` weights as a gather carries them, `fp8_parameters` of them FP8
// linear weights: at `weight_b` each, those at one byte under the FP8 parameter gather.
double gathered_weight_bytes(double parameters, double fp8_parameters, double weight_b,
                             const core::Fp8& fp8);
StageParameters stage_parameters(const core::JobSpec& job, std::int32_t pipeline_rank);
std::vector<StageParameters> parameters_per_stage(const core::JobSpec& job);
// Parameters whose optimizer state one rank keeps and updates: all of them, or with the
// distributed optimizer (ZeRO-1 and up) its shard — dense over dp·cp, experts over expert-dp,
// each divided into the hybrid-sharding replicas (ParallelPlan::shard_ranks).
double optimizer_parameters(const StageParameters& params, const core::ParallelPlan& plan);

struct StageMemory {
    double weights_bytes = 0.0;
    double gradients_bytes = 0.0;
    double optimizer_bytes = 0.0;
    double activations_bytes = 0.0; // stored by the micro-batches in flight (Korthikanti)
    // The micro-batch in its backward, on top: the layer it works on (backward_working_bytes),
    // less the loss's buffers where a fused backward has freed them by then.
    double backward_working_bytes = 0.0;
    double buffers_bytes = 0.0;
    // ZeRO-2/3: the FSDP units gathered at once (the one computing and those prefetched) and
    // the unsharded gradients of the units being reduce-scattered.
    double gathered_bytes = 0.0;
    std::int32_t in_flight = 0; // (micro-batch, chunk) pairs held until their backward
    // The caching allocator's reserve over the allocated peak (kAllocatorReserveFraction).
    double allocator_reserve_bytes = 0.0;
    // Outside PyTorch's allocator: the CUDA context, NCCL's and DeepEP's buffers
    // (RuntimeMemory, device_memory.h); none on a CPU device.
    double runtime_bytes = 0.0;
    // The peak of the tensors the allocator hands out: Megatron's "max allocated"
    // (torch.cuda.max_memory_allocated).
    double allocated_bytes() const {
        return weights_bytes + gradients_bytes + optimizer_bytes + activations_bytes +
               backward_working_bytes + buffers_bytes + gathered_bytes;
    }
    // What the allocator keeps from the device: Megatron's "max reserved".
    double reserved_bytes() const { return allocated_bytes() + allocator_reserve_bytes; }
    // What the device must hold (nvidia-smi's figure): what "fits" is judged by.
    double total_bytes() const { return reserved_bytes() + runtime_bytes; }
};

// The weights, gradients and optimizer state of a stage's rank under the plan's sharding, and
// what ZeRO-2/3 hold gathered (StageMemory's first three fields and gathered_bytes).
void sharded_state(const StageParameters& params, const core::ParallelPlan& plan,
                   const core::Precision& precision, StageMemory& into);

std::vector<StageMemory> memory_per_stage(const core::JobSpec& job, const core::Schedule& schedule);
// The same from each pipeline rank's in-flight counts (what the planner caches per schedule),
// and optionally the stages' parameters (which no recomputation changes).
std::vector<StageMemory> memory_per_stage(const core::JobSpec& job,
                                          const std::vector<core::InFlight>& in_flight,
                                          const std::vector<StageParameters>* parameters = nullptr);
std::vector<core::InFlight> in_flight_per_rank(const core::Schedule& schedule);

} // namespace trident::simulator
