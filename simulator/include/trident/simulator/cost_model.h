#pragma once
// Cost of every model chunk's forward (F), input-gradient (B) and weight-gradient (W) pass for
// one micro-batch, from the operation list and a Profile. Tensor-, context- and expert-
// parallel collectives run inside the pass that needs them (Megatron does not overlap them by
// default); each is timed on the fabric its group actually crosses.
#include "trident/core/job.h"
#include "trident/core/profile.h"
#include "trident/core/rank_grid.h"
#include "trident/core/schedule.h"
#include "trident/simulator/layer_ops.h"
#include "trident/simulator/memory.h"

#include <array>
#include <map>
#include <string>
#include <vector>

namespace trident::simulator {

struct PassCost {
    double compute_s = 0.0;    // kernels of the pass itself
    double recompute_s = 0.0;  // forward work repeated inside B
    double collective_s = 0.0; // tp / cp / ep collectives inside the pass
    double flops = 0.0;        // executed FLOPs (recomputation included)
    // Parts of compute_s + recompute_s: all GEMMs, the FP8 ones, and the FP8 casts.
    double gemm_s = 0.0, fp8_gemm_s = 0.0, fp8_cast_s = 0.0;
    // ZeRO-2/3: the pass's per-unit gathers and reduce-scatters on the data-parallel stream,
    // the part compute does not hide (sharding_overlap.h) and the stream's whole busy time.
    double sharding_s = 0.0, sharding_stream_s = 0.0;
    // The tensor-parallel collectives (within collective_s before any overlap); with
    // tp_comm_overlap, the part of them the GEMMs hide (taken out of collective_s).
    double tp_collective_s = 0.0, tp_hidden_s = 0.0;
    // The MoE token exchange (dispatch, combine, routing map; within collective_s) and, with
    // moe_shared_expert_overlap, the part the shared experts' compute hid (taken out of
    // collective_s); the shared experts' own compute (within compute_s + recompute_s).
    double moe_exchange_s = 0.0, moe_hidden_s = 0.0, shared_expert_s = 0.0;
    // Compute lost to collectives overlapping it (their SMs: Profile::overlap_slowdown).
    double contention_s = 0.0;
    // Operations the host issues for the pass, and the time the GPU waits for it to issue
    // them: a pass runs no faster than kernels × Profile::host_op_issue_s.
    double kernels = 0.0, host_s = 0.0;
    double total_s() const {
        return compute_s + recompute_s + collective_s + sharding_s + contention_s + host_s;
    }
};

struct ChunkCost {
    PassCost forward, backward_input, backward_weight;
    const PassCost& of(core::ActionKind kind) const;
};

// Counts each distinct fallback the profile reported.
using Fallbacks = std::map<std::string, std::int64_t>;

// Per-layer F/B/W costs shared by the cost models of many layouts of one job (the planner's):
// a layer's operations depend on tp, cp, ep, etp, the micro-batch, sequence parallelism, flash
// attention, tensor-parallel overlap (and whether the schedule defers W), the MoE token dispatcher,
// the layer's kind, recomputation and FP8 recipe and which of its groups cross nodes — not on pp,
// dp, the split or the schedule. Not thread-safe.
class LayerCostCache {
public:
    using Key = std::array<std::int64_t, 15>;
    static constexpr std::size_t kKindIndex = 10; // Key[10]: 0 layer, 2 embedding, 3 head
    std::map<Key, std::array<PassCost, 3>> entries;
    // Process groups' sizes and whether they leave the NVLink domain, by (tp, cp, dp, pp, ep, etp,
    // hybrid-sharding replicas, group kind, pipeline rank): the same for every layout with
    // those degrees.
    struct Shape {
        std::int64_t size;
        bool inter_node;
        std::int64_t domains; // NVLink domains (nodes, or NVL72 racks) the group spans
    };
    std::map<std::array<std::int64_t, 9>, Shape> group_shapes;
};

// One micro-batch's F + B + W seconds through the embedding, each layer (the plan's
// recomputation applied to every layer alike) and the loss head, on pipeline rank 0's
// placement (with the plan's tensor-parallel overlap): what the planner balances uneven stages by.
struct PipelineLoads {
    double embedding_s = 0.0;
    std::vector<double> layer_s;
    double head_s = 0.0;
    // The heaviest virtual stage of `split` under these loads.
    double heaviest_stage_s(const core::PipelineSplit& split) const;
};
PipelineLoads pipeline_loads(const core::JobSpec& job, const core::Profile& profile);
// The plan's FP8 recipe's GEMM rate on this device relative to its fp8 table (1 without FP8);
// SpecError("parallel.fp8.recipe") naming what the device runs when it does not run it.
double fp8_rate(const core::JobSpec& job, const core::Profile& profile);

class CostModel {
public:
    // `parameters`: each stage's (parameters_per_stage), when the caller has them.
    CostModel(const core::JobSpec& job, const core::Profile& profile,
              const std::vector<StageParameters>* parameters = nullptr,
              LayerCostCache* layer_costs = nullptr);
    // The model keeps references to the job and the profile: temporaries would dangle.
    CostModel(core::JobSpec&&, const core::Profile&, const std::vector<StageParameters>* = nullptr,
              LayerCostCache* = nullptr) = delete;
    CostModel(const core::JobSpec&, core::Profile&&, const std::vector<StageParameters>* = nullptr,
              LayerCostCache* = nullptr) = delete;

    const ChunkCost& chunk(std::int32_t pipeline_rank, std::int32_t chunk) const;
    // One activation or gradient message between adjacent pipeline ranks.
    double p2p_s(std::int32_t from_rank, std::int32_t to_rank) const;
    // `bytes` sent between two pipeline ranks (and as many back) over the fabric between them.
    double send_recv_s(std::int32_t from_rank, std::int32_t to_rank, double bytes) const;
    double p2p_bytes() const { return p2p_bytes_; }
    // A collective over `kind` groups of the ranks of `pipeline_rank`, on the fabric it crosses.
    double collective_s(core::GroupKind kind, std::int32_t pipeline_rank, core::Collective c,
                        double bytes) const;
    double memory_bound_s(core::MemoryKernel kernel, double bytes) const;
    // What an overlapped collective over `kind` groups of pipeline rank r's ranks takes from
    // the compute beside it: the fabric the group crosses says (Profile::overlap_slowdown).
    double overlap_slowdown(core::GroupKind kind, std::int32_t pipeline_rank) const;
    const Fallbacks& fallbacks() const { return fallbacks_; }
    // Seconds of one operation (all its repetitions) on pipeline rank r's placement: what the
    // passes add up, for the per-operation breakdown (layer_breakdown.h).
    double operation_s(const Op& op, std::int32_t pipeline_rank) const {
        return op_s(op, pipeline_rank);
    }
    // The parameters one rank of the stage holds (stage_parameters, computed once).
    const StageParameters& parameters(std::int32_t pipeline_rank) const;
    // Global rank that represents a pipeline rank (tp, cp, dp coordinates 0).
    std::int64_t representative(std::int32_t pipeline_rank) const;

private:
    friend PipelineLoads pipeline_loads(const core::JobSpec& job, const core::Profile& profile);
    struct NoChunks {};
    CostModel(const core::JobSpec& job, const core::Profile& profile, NoChunks);
    double op_s(const Op& op, std::int32_t pipeline_rank) const;
    // One FSDP unit's all-gather (ZeRO-3), reduce-scatter and FP8 weight cast on pipeline
    // rank r's shard groups.
    struct ShardUnitTimes {
        core::ShardUnit unit;
        double gather_s, scatter_s, cast_s;
    };
    ShardUnitTimes shard_unit_times(const core::ShardUnit& u, std::int32_t r) const;
    // ZeRO-2/3's exposed gathers and reduce-scatters of chunk c on pipeline rank r, from its
    // units' pass costs (forward order) and parameters.
    void add_sharding(ChunkCost& cost, const std::vector<const std::array<PassCost, 3>*>& units,
                      std::int32_t r, std::int32_t c) const;
    // F, B and W costs of an operation list, tensor-parallel collectives timed with the GEMMs
    // they meet (tp_pair_time).
    std::array<PassCost, 3> by_phase(const std::vector<Op>& ops, std::int32_t pipeline_rank) const;
    // A tensor-parallel collective, ops[i], and the GEMM it meets (Op::partner), `seconds` each
    // operation's own time: the collective's part that stays exposed and the compute the pair
    // loses beyond the two alone (SMs the collective takes, a GEMM cut into pieces). In
    // tp_overlap.cpp.
    struct PairedTime {
        double exposed_s = 0.0, contention_s = 0.0;
    };
    PairedTime tp_pair_time(const std::vector<Op>& ops, const std::vector<double>& seconds,
                            std::size_t i, std::int32_t pipeline_rank) const;
    // by_phase with what the plan does to every layer's passes: the shared experts beside the
    // token exchange and the host's issue rate.
    std::array<PassCost, 3> unit_costs(const std::vector<Op>& ops,
                                       std::int32_t pipeline_rank) const;

    // Size, whether it crosses nodes and how many NVLink domains it spans, of each group kind
    // on each pipeline rank's representative: asked for every collective, computed once.
    struct GroupShape {
        std::int64_t size = -1;
        bool inter_node = false;
        std::int64_t domains = 1;
        // Several domains with equal shares of more than one rank each: an all-to-all over it
        // splits into a network leg and an NVLink leg (spanning_all_to_all).
        bool splits_by_domain() const {
            return domains > 1 && size % domains == 0 && size > domains;
        }
    };
    const GroupShape& group_shape(core::GroupKind kind, std::int32_t pipeline_rank) const;
    // An all-to-all over a group spanning several NVLink domains: each rank sends what is
    // bound elsewhere over its NIC — an all-to-all among one rank per domain of `across_bytes`
    // (NCCL: the whole buffer; DeepEP: a copy per destination domain) — while `within_bytes`
    // cross NVLink among the domain's ranks (NCCL: the 1/domains bound for its own domain;
    // DeepEP: every copy, forwarded); the two run together, the slower sets the time.
    core::Timing spanning_all_to_all(const GroupShape& g, double across_bytes,
                                     double within_bytes) const;
    double deepep_all_to_all_s(const Op& op, std::int32_t pipeline_rank) const;

    const core::JobSpec& job_;
    const core::Profile& profile_;
    core::RankGrid grid_;
    double fp8_rate_ = 1.0;
    mutable std::vector<GroupShape> group_shapes_;                   // [kind * pp + pipeline rank]
    LayerCostCache* shared_ = nullptr;                               // the caller's caches, if any
    const std::vector<StageParameters>* given_parameters_ = nullptr; // the caller's, or
    mutable std::vector<StageParameters> parameters_;                // computed on first use
    std::vector<ChunkCost> chunks_;                                  // [rank * vpp + chunk]
    double p2p_bytes_ = 0.0;
    mutable Fallbacks fallbacks_;
    struct TimedCollective {
        std::int64_t size;
        bool inter_node;
        std::int64_t domains;
        core::Collective collective;
        double bytes, seconds;
        std::string fallback;
    };
    mutable std::vector<TimedCollective> timed_collectives_; // answers of collective_s
};

} // namespace trident::simulator
