#pragma once
// The numbers the simulator, the planner, the executors and the GUI all use, each defined once.
#include "trident/core/model_spec.h"

#include <cstdint>
#include <vector>

namespace trident::core {

// Megatron-Core's default data-parallel gradient bucket (DistributedDataParallelConfig,
// megatron/training: max(40 M, 1 M · data-parallel size with context parallelism)), in
// parameters: buckets grow with the group so each all-reduce stays bandwidth-bound.
std::int64_t ddp_bucket_elements(std::int64_t data_context_ranks);

// Adam's state per parameter: the fp32 master copy (when kept) and the two moments —
// Megatron's 12 bytes with fp32 state.
double optimizer_state_bytes_per_parameter(const Precision& precision);

// Bytes of training state one parameter costs on one rank: its weight and gradient, plus the
// optimizer's master copy and Adam's two moments, divided over the `optimizer_shards` ranks
// that share them (1 without the distributed optimizer; dp·cp for dense parameters with it,
// the expert-data group for routed experts). `master_sharded` false: the master copy is held
// whole on every rank even when the moments are sharded (the CUDA executor's layout).
double state_bytes_per_parameter(const Precision& precision, std::int64_t optimizer_shards,
                                 bool master_sharded = true);

// The precision the CPU executor trains in: fp32 weights and gradients, which are also the
// optimizer's weights (no separate master copy), fp32 Adam moments.
Precision cpu_executor_precision();

// Model FLOPs utilisation: model FLOPs / (step time · devices · peak FLOP/s per device). With
// the hardware FLOPs (recomputation included) the same formula gives HFU.
double flops_utilization(double flops, double step_s, double devices, double peak_flops_per_s);
// Achieved FLOP/s per device.
double flops_per_device_s(double flops, double step_s, double devices);

// A pipeline rank's bubble: the share of the step it is not busy (compute, collectives inside
// it, optimizer), 0 for an empty step.
double bubble_fraction(double idle_s, double step_s);
double idle_seconds(double step_s, double busy_s); // never negative

// The median of `values` (the mean of the middle two for an even count; 0 for none): step
// times over a run, errors over published runs.
double median(std::vector<double> values);

} // namespace trident::core
