#include "split_choices.h"

#include "trident/core/spec_error.h"
#include "trident/simulator/cost_model.h"

#include <cstdio>

namespace trident::planner {

void apply(const SplitChoice& choice, core::ParallelPlan& p) {
    p.pipeline_layout = choice.pipeline_layout;
    p.first_stage_layers = choice.first_stage_layers;
    p.last_stage_layers = choice.last_stage_layers;
    p.account_for_embedding = choice.account_for_embedding;
    p.account_for_loss = choice.account_for_loss;
}

namespace {

std::string ms(double s) {
    char text[32];
    std::snprintf(text, sizeof text, "%.3g ms", s * 1e3);
    return text;
}

} // namespace

std::vector<SplitChoice> SplitChooser::choices(const core::JobSpec& job) {
    const core::ParallelPlan& p = job.plan;
    if (space_.split_pinned()) {
        SplitChoice pinned{space_.pipeline_layout,   space_.account_for_embedding,
                           space_.account_for_loss,  space_.first_stage_layers,
                           space_.last_stage_layers, "pinned"};
        core::ParallelPlan trial = p;
        apply(pinned, trial);
        try {
            pinned.reason += " (" + core::layout_text(core::pipeline_split(job.model, trial)) + ")";
        } catch (const core::SpecError&) {
            // validation refuses this layout with the reason
        }
        return {pinned};
    }
    const std::int64_t stages = p.model_stages(), layers = job.model.num_layers;
    // Too many stages, or a grid that cannot be laid out: validation says why (and the choices
    // must not depend on which layout asked first).
    if (stages > layers || !p.expert_grid_tiles()) return {};
    if (stages == 1) return {SplitChoice{{}, false, false, {}, {}, "one stage: every layer"}};
    const Key key{p.tp,
                  p.cp,
                  p.ep,
                  p.expert_tp(),
                  p.micro_batch_size,
                  p.sequence_parallel,
                  p.flash_attention};
    const int placement = int(core::placement_of(p.schedule));
    const auto known = choices_.find({key, p.pp, p.vpp, placement});
    if (known != choices_.end()) return known->second;
    auto it = loads_.find(key);
    if (it == loads_.end())
        it = loads_.emplace(key, simulator::pipeline_loads(job, profile_)).first;
    const simulator::PipelineLoads& loads = it->second;

    // Each candidate split that the layers allow, with its heaviest stage; duplicates dropped.
    std::vector<SplitChoice> out;
    std::vector<std::vector<std::int64_t>> seen;
    const auto add = [&](SplitChoice c, const std::string& what) {
        core::ParallelPlan trial = p;
        apply(c, trial);
        const core::PipelineSplit split = core::pipeline_split(job.model, trial);
        for (const auto& seen_layers : seen)
            if (seen_layers == split.layers) return;
        seen.push_back(split.layers);
        c.reason = what + " (" + core::layout_text(split) + "): heaviest virtual stage " +
                   ms(loads.heaviest_stage_s(split)) + " per micro-batch";
        out.push_back(std::move(c));
    };
    // Only the splits the layers allow (core's rule, asked without an exception).
    SplitChoice even{}, counted{{}, true, true, {}, {}, ""};
    core::ParallelPlan trial = p;
    apply(even, trial);
    if (core::counted_split_fits(job.model, trial)) add(even, "even");
    apply(counted, trial);
    if (p.pp > 1 && core::counted_split_fits(job.model, trial))
        add(counted, "Megatron's --account-for-embedding/loss-in-pipeline-split");
    const std::vector<std::int64_t> balanced =
        core::balanced_layout(loads.embedding_s, loads.layer_s, loads.head_s, stages);
    if (!balanced.empty()) add({balanced, false, false, {}, {}, ""}, "balanced by cost");
    choices_.emplace(std::make_tuple(key, p.pp, p.vpp, placement), out);
    return out;
}

} // namespace trident::planner
