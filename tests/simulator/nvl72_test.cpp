// Rack-scale NVLink (GB200/GB300 NVL72): groups that span the 4-GPU trays of a rack stay on
// NVLink; only groups that span racks cross InfiniBand.
#include "../support/preset_profile.h"
#include "trident/core/job_loader.h"
#include "trident/core/spec_error.h"
#include "trident/simulator/cost_model.h"

#include <gtest/gtest.h>

using namespace trident;

namespace {

core::JobSpec nvl72(std::int64_t tp, std::int64_t racks, std::int64_t domain = 72) {
    core::JobInputs in;
    in.model = "llama3-70b";
    in.cluster = "gb200-nvl72";
    in.nodes = 18 * racks;
    in.tp = tp;
    in.micro_batch_size = 1;
    in.global_batch_size = 72 * racks / tp;
    in.seq_length = 4096;
    core::JobSpec job = core::load_job(in);
    job.cluster.nvlink_domain = domain;
    return job;
}

} // namespace

TEST(Nvl72, GroupsAcrossTraysStayOnNvlink) {
    const auto& gb200 = test::preset_profile("gb200-186gb");
    const double bytes = 64.0 * 1024 * 1024;
    // tp 8 spans two trays of one rack: the NVLink table, not InfiniBand.
    const core::JobSpec job = nvl72(8, 1);
    const simulator::CostModel cost(job, gb200);
    EXPECT_DOUBLE_EQ(
        cost.collective_s(core::GroupKind::tensor, 0, core::Collective::all_reduce, bytes),
        gb200.collective("nvlink", core::Collective::all_reduce, 8, bytes).seconds);
    // The 72 data-parallel ranks of two racks at tp 2 span both racks: InfiniBand.
    const core::JobSpec wide = nvl72(2, 2);
    const simulator::CostModel wide_cost(wide, gb200);
    EXPECT_DOUBLE_EQ(
        wide_cost.collective_s(core::GroupKind::data, 0, core::Collective::all_reduce, bytes),
        gb200.collective("infiniband", core::Collective::all_reduce, 72, bytes).seconds);
    // Without the domain the trays are separate nodes and tp 8 is refused.
    core::JobSpec trays = nvl72(8, 1);
    trays.cluster.nvlink_domain = 0;
    EXPECT_THROW(core::validate(trays), core::SpecError);
}
