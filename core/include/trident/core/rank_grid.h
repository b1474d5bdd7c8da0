#pragma once
// RankGrid: global rank <-> parallel coordinates in Megatron's tp-cp-ep-dp-pp order, and the
// member ranks of every process group. The simulator uses it for placement (which fabric a
// group crosses), the executor to create communicators.
//
// Dense layers see rank = tp + TP·(cp + CP·(dp + DP·pp)). Expert layers see the same pp but
// split the k = tp + TP·(cp + CP·dp) ranks of a stage as expert-tp (fastest) × ep × expert-dp,
// as Megatron-Core's expert RankGenerator ("tp-ep-dp-pp" over etp, ep, edp) does:
// k = etp + ETP·(ep + EP·edp). With etp = tp (the default) that is j = cp + CP·dp = ep + EP·edp.
#include "trident/core/parallel_plan.h"

#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

namespace trident::core {

struct RankCoord {
    std::int64_t tp = 0, cp = 0, dp = 0, pp = 0; // dense view
    std::int64_t etp = 0, ep = 0, edp = 0;       // expert view of (tp, cp, dp)
    bool operator==(const RankCoord&) const = default;
};

enum class GroupKind {
    tensor,       // tp ranks sharing a layer's weights
    context,      // cp ranks sharing a sequence
    data,         // dp ranks with the same model shard (gradients all-reduced here, cp == 1)
    data_context, // dp·cp ranks: where dense gradients are reduced when cp > 1
    pipeline,     // pp ranks, one per stage
    expert,       // ep ranks exchanging tokens (all-to-all)
    expert_data,  // ranks holding the same experts (expert gradients reduced here)
    model,        // tp·pp ranks holding one full model replica (per cp/dp position)
    embedding,    // first and last pipeline rank (tied-embedding gradient all-reduce)
    // Sharded state (ZeRO, FSDP) with hybrid-sharding replicas (num_distributed_optimizer_
    // instances): the dp·cp ranks split into that many consecutive blocks — a shard group each,
    // inside a node where it fits — and the replica groups across them (one rank of each block,
    // where the shards' gradients are all-reduced); the same for the expert-dp ranks.
    data_shard,
    data_replica,
    expert_data_shard,
    expert_data_replica,
    // etp·ep ranks (tp·ep when etp = tp): Megatron's tp_ep group, over which the allgather and
    // flex (DeepEP) token dispatchers move tokens.
    tensor_expert,
    // etp ranks slicing the same experts (Megatron's expert tensor-parallel group; the tensor
    // group when etp = tp): the alltoall dispatcher's all-gather after the exchange.
    expert_tensor,
};
inline constexpr std::array<std::string_view, 15> kGroupKindNames = {"tensor",
                                                                     "context",
                                                                     "data",
                                                                     "data_context",
                                                                     "pipeline",
                                                                     "expert",
                                                                     "expert_data",
                                                                     "model",
                                                                     "embedding",
                                                                     "data_shard",
                                                                     "data_replica",
                                                                     "expert_data_shard",
                                                                     "expert_data_replica",
                                                                     "tensor_expert",
                                                                     "expert_tensor"};

class RankGrid {
public:
    explicit RankGrid(const ParallelPlan& plan);

    std::int64_t world_size() const { return tp_ * cp_ * dp_ * pp_; }
    RankCoord coord(std::int64_t rank) const;
    // Rank of a dense-view coordinate (ep/edp ignored).
    std::int64_t rank(std::int64_t tp, std::int64_t cp, std::int64_t dp, std::int64_t pp) const;

    // Members of `rank`'s group in group order (the group-local rank is the index); empty
    // for the embedding group of a middle pipeline stage.
    std::vector<std::int64_t> group_of(GroupKind kind, std::int64_t rank) const;
    // Every group of a kind, each listed once, ordered by its smallest member.
    std::vector<std::vector<std::int64_t>> groups(GroupKind kind) const;

    // Nodes that `rank`'s group of `kind` spans (ranks fill nodes in order): 1 means it talks
    // over the intra-node fabric only.
    std::int64_t nodes_spanned(GroupKind kind, std::int64_t rank,
                               std::int64_t devices_per_node) const;

private:
    // Rank of an expert-view coordinate at pipeline rank pp.
    std::int64_t expert_rank(std::int64_t etp, std::int64_t ep, std::int64_t edp,
                             std::int64_t pp) const {
        return etp + etp_ * (ep + ep_ * edp) + tp_ * cp_ * dp_ * pp;
    }

    std::int64_t tp_, cp_, dp_, pp_, ep_, etp_, edp_;
    std::int64_t instances_; // hybrid-sharding replicas
    // V-shaped schedules put the first and the last stage on pipeline rank 0: the tied
    // embedding and its copy sit on one rank, so there is no embedding group.
    bool ends_on_one_rank_ = false;
};

// Distinct domains of `ranks_per_domain` consecutive ranks (nodes, NVLink domains) that
// `members` fall in.
std::int64_t domains_spanned(std::vector<std::int64_t> members, std::int64_t ranks_per_domain);

} // namespace trident::core
