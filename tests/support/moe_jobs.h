#pragma once
// Inputs and checks several MoE tests share.
#include "trident/core/job_loader.h"
#include "trident/core/spec_error.h"

#include <gtest/gtest.h>
#include <string>

namespace trident::test {

// DeepSeek-V3 on 64 HGX H800 nodes (512 GPUs): tp 1, pp 8 (7 + 6 × 8 + 6 layers), ep 64, the
// flex dispatcher, ZeRO-1, one 4,096-token sequence a micro-batch, batch 1,024.
inline core::JobInputs deepseek_v3_on_512_h800() {
    core::JobInputs in;
    in.model = "deepseek-v3";
    in.cluster = "hgx-h800";
    in.nodes = 64;
    in.tp = 1;
    in.pp = 8;
    in.ep = 64;
    in.dp = "auto";
    in.micro_batch_size = 1;
    in.global_batch_size = 1024;
    in.seq_length = 4096;
    in.distributed_optimizer = true;
    in.first_stage_layers = 7;
    in.last_stage_layers = 6;
    in.moe_token_dispatcher = "flex";
    return in;
}

// load_job(in) refuses with `field`, its reason containing `words`.
inline void expect_refused(const core::JobInputs& in, const std::string& field,
                           const std::string& words) {
    try {
        core::load_job(in);
        ADD_FAILURE() << "accepted; expected " << field << ": …" << words << "…";
    } catch (const core::SpecError& e) {
        EXPECT_EQ(e.field(), field);
        EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
}

} // namespace trident::test
