// libFuzzer target for the spec loaders: any byte string must either load or raise SpecError;
// any other exception, crash or sanitizer report is a bug. See docs/building.md ("Fuzzing").
#include "trident/core/job.h"
#include "trident/core/parameter_count.h"
#include "trident/core/rank_grid.h"
#include "trident/core/spec_error.h"

#include <cstddef>
#include <cstdint>
#include <string_view>

using namespace trident::core;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    Json j;
    try {
        j = parse_json_text(text, "fuzz");
    } catch (const SpecError&) {
        return 0;
    }
    // The same document tried as every kind of spec, then as a whole plan file's parts.
    try {
        const ModelSpec m = model_from_json(j);
        (void)count_parameters(m);
    } catch (const SpecError&) {
    }
    try {
        (void)cluster_from_json(j);
    } catch (const SpecError&) {
    }
    try {
        (void)training_from_json(j, 2048);
    } catch (const SpecError&) {
    }
    try {
        const ParallelPlan p = plan_from_json(j);
        if (p.devices() <= 4096) {
            const RankGrid grid(p);
            for (std::size_t k = 0; k < kGroupKindNames.size(); ++k)
                (void)grid.group_of(static_cast<GroupKind>(k), grid.world_size() - 1);
        }
    } catch (const SpecError&) {
    }
    try {
        if (j.is_object() && j.contains("model") && j.contains("cluster") &&
            j.contains("training") && j.contains("parallel")) {
            JobSpec job;
            job.model = model_from_json(j["model"]);
            job.cluster = cluster_from_json(j["cluster"]);
            job.training = training_from_json(j["training"], job.model.max_position_embeddings);
            job.plan = plan_from_json(j["parallel"]);
            if (job.plan.dp > 0) validate(job);
        }
    } catch (const SpecError&) {
    }
    return 0;
}
