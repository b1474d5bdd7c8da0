// `trident launch`: the mpirun command and sbatch script it builds from a plan and a hostfile,
// and its refusals. (The single-host launch that really runs is in tests/mpi/training_test.)
#include "../support/trident_process.h"

#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>

namespace fs = std::filesystem;
using trident::test::run_trident;

namespace {

const std::string kTp4Plan = std::string(TRIDENT_FIXTURES) + "/plans/gpt-tiny-tp4-two-nodes.json";

std::string write_temp(const std::string& name, const std::string& text) {
    const fs::path p = fs::path(testing::TempDir()) / name;
    std::ofstream(p) << text;
    return p.string();
}

} // namespace

TEST(Launch, KeepsEveryTensorGroupOnOneHost) {
    // 6 slots per host: only whole groups of 4 go on each, so 4 + 4, never 6 + 2.
    const auto r = run_trident({"launch", "--plan", kTp4Plan, "--hostfile",
                                write_temp("hosts6", "# two nodes\nnode1 slots=6\nnode2 slots=6\n"),
                                "--dry-run", "--", "--steps", "5"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("mpirun -np 8 --host node1:4,node2:4 --map-by slot"), std::string::npos)
        << r.out;
    EXPECT_NE(r.out.find(" run --plan " + fs::absolute(kTp4Plan).string() + " --steps 5"),
              std::string::npos)
        << r.out;
    // An H100 cluster: NCCL's environment goes to every rank.
    EXPECT_NE(r.out.find("-x CUDA_DEVICE_MAX_CONNECTIONS=1"), std::string::npos) << r.out;
}

TEST(Launch, RefusesHostsThatWouldSplitATensorGroup) {
    const auto r =
        run_trident({"launch", "--plan", kTp4Plan, "--hostfile",
                     write_temp("hosts3", "node1 slots=3\nnode2 slots=6\n"), "--dry-run"});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("trident: error: --hostfile: the hosts hold 4 of the plan's 8 ranks"),
              std::string::npos)
        << r.err;
}

TEST(Launch, RefusesMalformedHostfiles) {
    const auto r = run_trident({"launch", "--plan", kTp4Plan, "--hostfile",
                                write_temp("hosts-bad", "node1 slots=four\n"), "--dry-run"});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("hosts-bad:1: slots must be a positive integer"), std::string::npos)
        << r.err;
    const auto none = run_trident({"launch", "--plan", kTp4Plan, "--dry-run"});
    EXPECT_EQ(none.exit_code, 2);
    EXPECT_NE(none.err.find("--hostfile: required"), std::string::npos) << none.err;
}

TEST(Launch, WritesAnSbatchScriptThatUsesSrun) {
    const fs::path script = fs::path(testing::TempDir()) / "trident-launch.sbatch";
    const auto r = run_trident({"launch", "--plan", kTp4Plan, "--slurm", script.string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    std::ifstream in(script);
    const std::string text{std::istreambuf_iterator<char>(in), {}};
    EXPECT_EQ(text.rfind("#!/bin/bash\n", 0), 0u);
    for (const char* line :
         {"#SBATCH --nodes=2\n", "#SBATCH --ntasks-per-node=4\n", "#SBATCH --gpus-per-node=4\n",
          "export CUDA_DEVICE_MAX_CONNECTIONS=1\n",
          "srun --mpi=pmix --ntasks=8 --ntasks-per-node=4 --distribution=block:block "})
        EXPECT_NE(text.find(line), std::string::npos) << line << "\n" << text;
    EXPECT_NE(text.find(" run --plan " + fs::absolute(kTp4Plan).string()), std::string::npos);
}

TEST(Launch, TakesThePlannersOutputStraightIn) {
    const fs::path plan = fs::path(testing::TempDir()) / "trident-launch-planned.json";
    const auto planned =
        run_trident({"plan", "--model", "gpt2-124m", "--cluster", "dgx-h100", "--nodes", "2",
                     "--gbs", "64", "--seq-length", "1024", "--out", plan.string()});
    ASSERT_EQ(planned.exit_code, 0) << planned.err;
    const auto r = run_trident({"launch", "--plan", plan.string(), "--hostfile",
                                write_temp("hosts8", "a slots=8\nb slots=8\n"), "--dry-run"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("mpirun -np 16 --host a:8,b:8 "), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(" run --plan " + plan.string()), std::string::npos) << r.out;
}

TEST(Launch, BindsEachCpuRankToACorePerBlasThread) {
    const std::string plan = std::string(TRIDENT_FIXTURES) + "/plans/gpt-tiny-dp2.json";
    const std::string hosts = write_temp("hosts-local", "localhost slots=2\n");
    const auto two = run_trident(
        {"launch", "--plan", plan, "--hostfile", hosts, "--dry-run", "--", "--threads", "2"});
    ASSERT_EQ(two.exit_code, 0) << two.err;
    EXPECT_NE(two.out.find("--map-by slot:PE=2 --bind-to core"), std::string::npos) << two.out;
    const auto one = run_trident({"launch", "--plan", plan, "--hostfile", hosts, "--dry-run"});
    ASSERT_EQ(one.exit_code, 0) << one.err;
    EXPECT_NE(one.out.find("--map-by slot --bind-to core"), std::string::npos) << one.out;
    const std::string script = (fs::path(testing::TempDir()) / "threads.sbatch").string();
    const auto slurm =
        run_trident({"launch", "--plan", plan, "--slurm", script, "--", "--threads=3"});
    ASSERT_EQ(slurm.exit_code, 0) << slurm.err;
    std::ifstream in(script);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_NE(text.find("#SBATCH --cpus-per-task=3"), std::string::npos) << text;
    EXPECT_NE(text.find("--cpus-per-task=3 --cpu-bind=cores"), std::string::npos) << text;
    const auto bad = run_trident(
        {"launch", "--plan", plan, "--hostfile", hosts, "--dry-run", "--", "--threads", "many"});
    EXPECT_EQ(bad.exit_code, 2);
    EXPECT_NE(bad.err.find("--threads: expected 1 to 256 threads, got \"many\""), std::string::npos)
        << bad.err;
}
