#pragma once
// The small single-host job the executor, chunk and backend tests start from: a model (a preset
// name or a file), cluster `localhost` with one device per rank of the layout, and the layout,
// batch and sequence a test changes. One place, so every such test builds the same JobInputs.
#include "trident/core/job_loader.h"

#include <optional>
#include <string>

namespace trident::test {

struct TinyJob {
    std::string model = "gpt-tiny";
    std::int64_t tp = 1, pp = 1, vpp = 1;
    std::int64_t micro_batch_size = 2, global_batch_size = 2, seq_length = 8;
    bool sequence_parallel = false;
    std::optional<std::string> recompute;

    core::JobInputs inputs() const {
        core::JobInputs in;
        in.model = model;
        in.cluster = "localhost";
        in.devices_per_node = tp * pp;
        in.tp = tp;
        in.pp = pp;
        in.dp = "1";
        if (vpp > 1) in.vpp = vpp;
        in.sequence_parallel = sequence_parallel;
        in.micro_batch_size = micro_batch_size;
        in.global_batch_size = global_batch_size;
        in.seq_length = seq_length;
        if (recompute) in.recompute = *recompute;
        return in;
    }
    core::JobSpec load() const { return core::load_job(inputs()); }
};

} // namespace trident::test
