#pragma once
// JobSpec: everything needed to describe one training job — model, cluster, training and the
// parallel plan — with the cross-spec rules (heads % tp, devices == tp·cp·dp·pp, ...).
// A plan file (`trident.plan/1`) holds the `parallel` object and may name or inline the
// model, cluster and training; command-line options override any of them.
#include "trident/core/cluster_spec.h"
#include "trident/core/model_spec.h"
#include "trident/core/parallel_plan.h"
#include "trident/core/pipeline_split.h"
#include "trident/core/training_spec.h"

#include <cstdint>
#include <optional>
#include <string>

namespace trident::core {

struct JobSpec {
    ModelSpec model;
    ClusterSpec cluster;
    TrainingSpec training;
    ParallelPlan plan;
    // The device profile the plan was made with, as the plan file recorded it (a path, tried
    // relative to the plan file too, or a preset name); empty when none was recorded.
    std::string profile;
    // The training data the plan was made for (`plan --data-path P --split S`): what `trident
    // run --plan` reads unless given its own --data-path. Empty: synthetic sequences.
    std::string data_path, data_split;

    std::int64_t micro_batches_per_step() const;
    // Which layers each virtual stage holds (throws SpecError when the plan cannot split them).
    PipelineSplit pipeline_split() const;
    // The layers of the largest model chunk (every chunk's, when the split is even).
    std::int64_t max_layers_per_chunk() const;
    // What the plan recomputes of layer `layer` (0-based): under full recomputation, block
    // recomputes the first num_layers of each model chunk and keeps the rest, uniform
    // recomputes every layer; selective recomputes every layer's attention core.
    RecomputeGranularity layer_recompute(std::int64_t layer) const;
    // The same for a layer at `position` (0-based) inside its chunk.
    RecomputeGranularity recompute_at(std::int64_t position) const;
    // The FP8 recipe layer `layer`'s linear layers run (none for the BF16 first/last layers).
    Fp8Recipe layer_fp8(std::int64_t layer) const;
};

// Full recomputation without a layer count (`--recompute full` alone) recomputes every layer:
// block over all the layers of a model chunk, uniform in groups of one (Megatron's
// --recompute-num-layers 1). Other recomputations come back unchanged.
Recompute with_recompute_defaults(Recompute r, std::int64_t layers_per_chunk);

// Every rule that spans specs; throws SpecError naming the field and the rule.
void validate(const JobSpec& job);
// Selective recomputation's modules must exist in the model (mla_up_proj needs MLA, moe and
// moe_act an MoE layer, shared_experts a shared expert, mlp a dense layer).
void validate_recompute_modules(const ModelSpec& m, const Recompute& rc);
// Megatron-Core's rules for --overlap-moe-expert-parallel-comm beyond ep and the dispatcher:
// virtual stages at pp > 1, no full recomputation, no moe module recomputed. The reason it
// cannot run (empty: it can), and the check that throws it.
std::string moe_overlap_schedule_problem(const ParallelPlan& p);
void validate_moe_overlap_schedule(const ParallelPlan& p);
// --moe-shared-expert-overlap: shared experts, alltoall or flex, not with the all-to-all
// overlap or the shared_experts recomputation module.
std::string shared_expert_overlap_problem(const ModelSpec& m, const ParallelPlan& p);
void validate_shared_expert_overlap(const ModelSpec& m, const ParallelPlan& p);

// Writes a self-contained plan file: model, cluster and training inline, and the profile
// when one is recorded.
Json to_json(const JobSpec& job);

} // namespace trident::core
