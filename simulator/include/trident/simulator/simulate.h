#pragma once
// One training step, end to end: the plan's pipeline schedule timed with the cost model, then
// the data-parallel gradient reduction (bucketed; optionally overlapped with the last
// backward), the tied-embedding sync, the optimizer step and — with the distributed optimizer
// — the parameter all-gather. Step time is the slowest pipeline stage's finish.
#include "trident/core/job.h"
#include "trident/core/profile.h"
#include "trident/core/step_numbers.h"
#include "trident/core/trace.h"
#include "trident/simulator/cost_model.h"
#include "trident/simulator/memory.h"

#include <vector>

namespace trident::simulator {

struct StageReport {
    std::int32_t stage = 0;
    std::int64_t representative_rank = 0;
    std::int64_t layers = 0;      // transformer layers over the rank's model chunks
    double compute_s = 0.0;       // F, B, W kernels
    double recompute_s = 0.0;     // repeated forward inside B
    double collective_s = 0.0;    // tp / cp / ep collectives inside the passes (exposed)
    double data_parallel_s = 0.0; // exposed gradient reduction, embedding sync, param gather
    double optimizer_s = 0.0;
    double bubble_s = 0.0; // idle: pipeline fill/drain and waits for point-to-point data
    // Within compute + recompute: every GEMM, the FP8 ones, and the FP8 casts.
    double gemm_s = 0.0, fp8_gemm_s = 0.0, fp8_cast_s = 0.0;
    // ZeRO-2/3: the per-unit gathers and reduce-scatters the passes leave exposed, and the
    // data-parallel stream's whole busy time for them (the rest hidden under compute).
    double sharding_s = 0.0, sharding_stream_s = 0.0;
    // The tensor-parallel collectives (within collective_s), the part tp_comm_overlap hid (not
    // in collective_s), and the compute the passes lost to overlapped collectives' SMs (the
    // step tail's share is within data_parallel_s).
    double tp_collective_s = 0.0, tp_hidden_s = 0.0, contention_s = 0.0;
    // Kernels the host issued for the passes, and the time the GPU waited for it to issue them
    // (Profile::host_op_issue_s; not in compute_s).
    double kernels = 0.0, host_s = 0.0;
    double moe_exchange_s = 0.0; // MoE token dispatch and combine (within collective_s)
    // Of it, what merged forward-backward pairs hid (overlap_moe_expert_parallel_comm; taken
    // out of collective_s).
    double moe_hidden_s = 0.0;
    double pipeline_end_s = 0.0;
    StageMemory memory;
    double bubble_fraction(double step_s) const { return core::bubble_fraction(bubble_s, step_s); }
    // The rank's busy time over the step: its passes and its step tail.
    double busy_s() const {
        return compute_s + recompute_s + collective_s + sharding_s + contention_s + host_s +
               data_parallel_s + optimizer_s;
    }
};

struct Report {
    core::JobSpec job;
    std::string profile_name;
    std::string profile_kind; // measured | derived
    double step_time_s = 0.0;
    double tokens_per_s = 0.0;
    double model_flops = 0.0;       // per step, all devices
    double hardware_flops = 0.0;    // recomputation included
    double tflops_per_device = 0.0; // model FLOPs
    double mfu = 0.0;               // against the parameters' dtype peak (BF16), as NeMo prints it
    double mfu_fp8_peak = 0.0;      // against the recipe's own peak: FP8's, FP4's for NVFP4
    double hfu = 0.0;
    double peak_flops_per_s = 0.0;
    double memory_capacity_bytes = 0.0;
    double host_op_issue_s = 0.0; // the profile's (0: not modelled)
    std::int32_t microbatches = 0;
    std::vector<StageReport> stages;
    Fallbacks fallbacks;
    core::Trace trace; // simulated events (empty unless asked for)
};

struct SimulateOptions {
    bool trace = false;
    // The data-parallel gradient bucket in parameters; 0: Megatron's default
    // (core::ddp_bucket_elements of the data × context ranks).
    double bucket_parameters = 0.0;
    // Each pipeline rank's in-flight counts for the plan's schedule, when the caller has them
    // (the planner caches them per schedule); computed from the schedule otherwise.
    const std::vector<core::InFlight>* in_flight = nullptr;
    // Each stage's parameters (parameters_per_stage), likewise.
    const std::vector<StageParameters>* parameters = nullptr;
    // Layer costs shared across the layouts of one job (LayerCostCache), likewise.
    LayerCostCache* layer_costs = nullptr;
};

Report simulate(const core::JobSpec& job, const core::Profile& profile,
                const SimulateOptions& options = {});

// What a stage does after its last backward: exposed gradient reduction, tied-embedding sync,
// the optimizer step (with the gradient-norm all-reduce) and the distributed optimizer's
// parameter all-gather.
struct StepTail {
    double gradient_reduce_s = 0.0;
    double embedding_sync_s = 0.0;
    double copy_sync_s = 0.0; // DualPipe: the two model copies' gradients summed
    double optimizer_s = 0.0;
    double parameter_gather_s = 0.0;
    // The compute the overlapped reduction and gather slow down by taking its SMs.
    double contention_s = 0.0;
    double total_s() const {
        return gradient_reduce_s + embedding_sync_s + copy_sync_s + optimizer_s +
               parameter_gather_s + contention_s;
    }
};
// When a stage's model chunks have all their gradients (the pipeline timeline's
// grads_ready_s, chunk by chunk) and when its pipeline work ends.
struct ChunkTiming {
    std::vector<double> grads_ready_s;
    double pipeline_end_s = 0.0;
};
// `timing` absent: the exposed gradient reduction is the least any timing can leave (a lower
// bound for the planner's pruning).
StepTail step_tail(const core::JobSpec& job, const CostModel& cost, std::int32_t stage,
                   double bucket_parameters = SimulateOptions{}.bucket_parameters,
                   const ChunkTiming* timing = nullptr);

} // namespace trident::simulator
