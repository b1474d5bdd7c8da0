// `trident profile --backend cpu` under mpirun: every repetition count inside a collective
// measurement is agreed by the ranks, so a rank whose clock runs ahead of the others' (made so
// by the test-only --test-slow-rank, which sleeps after its collective repetitions) cannot send
// the ranks into different collectives. Before the counts were agreed this deadlocked at the
// first collective; `timeout` turns a hang into a failure instead of stalling CI.
#include "../support/trident_process.h"

#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <sstream>
#include <thread>

namespace fs = std::filesystem;

TEST(CpuProfiler, FinishesWithOneRankSlowedUnequally) {
    // Without --out the profile goes where plan, simulate and run look for it: ./cpu-host.json
    // and the user's profile folder (here a temporary one).
    const fs::path dir = fs::path(testing::TempDir()) / "trident-slow-rank-profile";
    fs::remove_all(dir);
    fs::create_directories(dir);
    const fs::path out = dir / "cpu-host.json", copy = dir / "user" / "cpu-host.json";
    const auto r = trident::test::run_shell(
        "cd '" + dir.string() + "' && TRIDENT_PROFILE_DIR='" + (dir / "user").string() +
        "' timeout 100 mpirun --allow-run-as-root --oversubscribe -x TRIDENT_PROFILE_DIR -np 2 " +
        std::string(TRIDENT_BINARY) + " profile --backend cpu --quick --test-slow-rank 1");
    ASSERT_NE(r.exit_code, 124) << "the profiler hung (timeout)\n" << r.err;
    ASSERT_EQ(r.exit_code, 0) << r.err;
    std::ifstream in(out);
    std::stringstream text;
    text << in.rdbuf();
    EXPECT_NE(text.str().find("\"trident.profile/1\""), std::string::npos);
    EXPECT_NE(text.str().find("\"all_to_all\""), std::string::npos); // the collectives finished
    EXPECT_NE(text.str().find("\"grouped_gemm\""), std::string::npos); // the experts' GEMMs
    EXPECT_TRUE(fs::exists(copy)) << r.out;
    EXPECT_NE(r.out.find("wrote cpu-host.json and " + copy.string()), std::string::npos) << r.out;
    // Without a terminal, rank 0 says which phase it is in, once per phase.
    EXPECT_NE(r.err.find("trident profile: collectives"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("trident profile: collectives"),
              r.err.rfind("trident profile: collectives"))
        << "one line per phase, from rank 0 only:\n"
        << r.err;
}

TEST(CpuThreads, ARankBoundToFewerCoresThanItsThreadsIsTold) {
    // Open MPI binds `mpirun -np 1` to one core: two kernel threads would share it.
    const std::string run = std::string(TRIDENT_BINARY) +
                            " run --model gpt-tiny --cluster localhost --devices-per-node 1 "
                            "--mbs 2 --gbs 8 --steps 1 --threads 2";
    const auto bound = trident::test::run_shell(
        "timeout 60 mpirun --allow-run-as-root -np 1 --bind-to core " + run);
    ASSERT_EQ(bound.exit_code, 0) << bound.err;
    EXPECT_NE(bound.err.find("warning: --threads: 2 kernel threads per rank, but a rank may run on "
                             "only 1 core"),
              std::string::npos)
        << bound.err;
    EXPECT_NE(bound.err.find("--map-by slot:PE=2 --bind-to core"), std::string::npos) << bound.err;
    if (std::thread::hardware_concurrency() < 2) GTEST_SKIP() << "one core: nothing to unbind to";
    const auto unbound = trident::test::run_shell(
        "timeout 60 mpirun --allow-run-as-root -np 1 --bind-to none " + run);
    ASSERT_EQ(unbound.exit_code, 0) << unbound.err;
    EXPECT_EQ(unbound.err.find("--threads"), std::string::npos) << unbound.err;
}
