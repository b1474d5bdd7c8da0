#pragma once
// GPT-2 124M on `nodes` DGX H100 nodes at tp 1 · pp 1 (dp filling the devices): the job the
// whole-run tests (time to train, goodput, run segments) count by hand. One place, so each of
// them builds the same JobInputs.
#include "trident/core/job_loader.h"

#include <cstdint>

namespace trident::test {

inline core::JobSpec gpt2_on_dgx_h100(std::int64_t nodes, std::int64_t micro_batch_size,
                                      std::int64_t global_batch_size, std::int64_t seq_length) {
    core::JobInputs in;
    in.model = "gpt2-124m";
    in.cluster = "dgx-h100";
    in.nodes = nodes;
    in.tp = 1;
    in.pp = 1;
    in.dp = "auto";
    in.micro_batch_size = micro_batch_size;
    in.global_batch_size = global_batch_size;
    in.seq_length = seq_length;
    return core::load_job(in);
}

} // namespace trident::test
