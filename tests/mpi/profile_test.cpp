// `trident profile --backend cpu` under mpirun: every repetition count inside a collective
// measurement is agreed by the ranks, so a rank whose clock runs ahead of the others' (made so
// by the test-only --test-slow-rank, which sleeps after its collective repetitions) cannot send
// the ranks into different collectives. Before the counts were agreed this deadlocked at the
// first collective; `timeout` turns a hang into a failure instead of stalling CI.
#include "../cli/run_command.h"

#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <sstream>

namespace fs = std::filesystem;

TEST(CpuProfiler, FinishesWithOneRankSlowedUnequally) {
    const fs::path out = fs::path(testing::TempDir()) / "trident-slow-rank-profile.json";
    fs::remove(out);
    const auto r = trident::test::run_shell(
        "timeout 100 mpirun --allow-run-as-root --oversubscribe -np 2 " +
        std::string(TRIDENT_BINARY) + " profile --backend cpu --quick --test-slow-rank 1 --out " +
        out.string());
    ASSERT_NE(r.exit_code, 124) << "the profiler hung (timeout)\n" << r.err;
    ASSERT_EQ(r.exit_code, 0) << r.err;
    std::ifstream in(out);
    std::stringstream text;
    text << in.rdbuf();
    EXPECT_NE(text.str().find("\"trident.profile/1\""), std::string::npos);
    EXPECT_NE(text.str().find("\"all_to_all\""), std::string::npos); // the collectives finished
    // Without a terminal, rank 0 says which phase it is in, once per phase.
    EXPECT_NE(r.err.find("trident profile: collectives"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("trident profile: collectives"), r.err.rfind("trident profile: collectives"))
        << "one line per phase, from rank 0 only:\n"
        << r.err;
}
