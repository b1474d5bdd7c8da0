// `trident launch`: the mpirun command and sbatch script it builds from a plan and a hostfile,
// and its refusals. (The single-host launch that really runs is in tests/mpi/training_test.)
#include "../support/trident_process.h"

#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>

namespace fs = std::filesystem;
using trident::test::run_shell;
using trident::test::run_trident;

namespace {

const std::string kTp4Plan = std::string(TRIDENT_FIXTURES) + "/plans/gpt-tiny-tp4-two-nodes.json";

std::string read_all(const fs::path& p) {
    std::ifstream in(p);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

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
          "srun --mpi=pmix --kill-on-bad-exit=1 --ntasks=8 --ntasks-per-node=4 "
          "--distribution=block:block "})
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

// Site options go in as #SBATCH lines; the job runs in --workdir, with the paths under it
// written relative to it; a path under /tmp is warned about.
TEST(Launch, SlurmScriptTakesSiteOptionsAndAWorkdir) {
    const fs::path work = fs::path(testing::TempDir()) / "trident-slurm-work";
    fs::remove_all(work);
    fs::create_directories(work / "plans");
    fs::copy_file(kTp4Plan, work / "plans/p.json");
    const fs::path script = work / "job.sbatch";
    const auto r = run_trident(
        {"launch", "--plan", (work / "plans/p.json").string(), "--slurm", script.string(),
         "--sbatch-args", "--time=04:00:00 -p gpu --account abc --output=logs/%j.out --requeue",
         "--srun-mpi", "pmi2", "--workdir", work.string(), "--", "--save=" + (work / "ck").string(),
         "--load", (work / "ck").string(), "--data-path", "/tmp/no-such-dataset"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const std::string text = read_all(script);
    for (const std::string& line : std::vector<std::string>{
             "#SBATCH --time=04:00:00\n", "#SBATCH -p gpu\n", "#SBATCH --account=abc\n",
             "#SBATCH --output=logs/%j.out\n", "#SBATCH --requeue\n",
             "#SBATCH --chdir=" + work.string() + "\n", "srun --mpi=pmi2 --kill-on-bad-exit=1 ",
             " run --plan plans/p.json --save=ck --load ck --data-path /tmp/no-such-dataset\n"})
        EXPECT_NE(text.find(line), std::string::npos) << line << "\n" << text;
    EXPECT_NE(
        r.err.find("trident: warning: --slurm: " + work.string() + " is under a node-local folder"),
        std::string::npos)
        << r.err;
    EXPECT_NE(r.err.find("warning: --slurm: /tmp/no-such-dataset is under a node-local folder"),
              std::string::npos)
        << r.err;
    EXPECT_NE(r.out.find("starts 8 ranks on 2 nodes (srun --mpi=pmi2: given)"), std::string::npos)
        << r.out;
}

TEST(Launch, RefusesSbatchArgsThePlanDecides) {
    const std::string script = (fs::path(testing::TempDir()) / "refused.sbatch").string();
    const std::vector<std::pair<std::string, std::string>> cases = {
        {"--nodes 4", "--sbatch-args: --nodes=4: the plan's cluster.nodes decides it"},
        {"-n 8", "--sbatch-args: -n 8: the plan decides it"},
        {"--chdir=/x", "--sbatch-args: --chdir=/x: give --workdir"},
        {"time=4", "--sbatch-args: 'time=4' is not an sbatch option"}};
    for (const auto& [args, expected] : cases) {
        const auto r =
            run_trident({"launch", "--plan", kTp4Plan, "--slurm", script, "--sbatch-args", args});
        EXPECT_EQ(r.exit_code, 2) << args;
        EXPECT_NE(r.err.find("trident: error: " + expected), std::string::npos) << r.err;
    }
    EXPECT_FALSE(fs::exists(script));
    const auto stray = run_trident(
        {"launch", "--plan", kTp4Plan, "--hostfile", "h", "--srun-mpi", "pmix", "--dry-run"});
    EXPECT_EQ(stray.exit_code, 2);
    EXPECT_NE(stray.err.find("--srun-mpi: goes with --slurm FILE"), std::string::npos) << stray.err;
}

// Without --srun-mpi the plugin is what this machine's srun offers (a stand-in srun here).
TEST(Launch, DetectsTheSrunMpiPlugin) {
    const fs::path bin = fs::path(testing::TempDir()) / "trident-fake-srun";
    fs::create_directories(bin);
    const auto fake_srun = [&](const std::string& plugins) {
        std::ofstream(bin / "srun") << "#!/bin/sh\necho 'MPI plugin types are...'\nfor p in "
                                    << plugins << "; do echo \"\t$p\"; done\n";
        fs::permissions(bin / "srun", fs::perms::owner_all);
    };
    const std::string script = (bin / "job.sbatch").string();
    const std::string command = "PATH=" + bin.string() + ":$PATH " + TRIDENT_BINARY +
                                " launch --plan " + kTp4Plan + " --slurm " + script;
    fake_srun("none pmi2 cray_shasta");
    auto r = run_shell(command);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(read_all(script).find("srun --mpi=pmi2 "), std::string::npos);
    EXPECT_NE(r.out.find("(srun --mpi=pmi2: the best of `srun --mpi=list` here)"),
              std::string::npos)
        << r.out;
    fake_srun("none pmi2 pmix pmix_v4");
    r = run_shell(command);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(read_all(script).find("srun --mpi=pmix "), std::string::npos);
}

// A plan from `plan --out` with neither a length nor data is launched with a loud warning.
TEST(Launch, WarnsWhenTheJobTrainsOneSyntheticStep) {
    const fs::path plan = fs::path(testing::TempDir()) / "trident-launch-one-step.json";
    const auto planned =
        run_trident({"plan", "--model", "gpt2-124m", "--cluster", "dgx-h100", "--gbs", "64",
                     "--seq-length", "1024", "--out", plan.string()});
    ASSERT_EQ(planned.exit_code, 0) << planned.err;
    EXPECT_NE(planned.err.find("trident: warning: --out: " + plan.string() +
                               " runs as written: it trains 1 iteration of synthetic sequences "
                               "(give `trident plan` --train-iters N and --data-path PREFIX"),
              std::string::npos)
        << planned.err;
    const auto r = run_trident({"launch", "--plan", plan.string(), "--hostfile",
                                write_temp("hosts8one", "a slots=8\n"), "--dry-run"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find("trident: warning: --plan: the job trains 1 iteration of synthetic "
                         "sequences (the plan's train_iters is 1)"),
              std::string::npos)
        << r.err;
    const auto told = run_trident({"launch", "--plan", plan.string(), "--hostfile",
                                   write_temp("hosts8two", "a slots=8\n"), "--dry-run", "--",
                                   "--train-iters", "100", "--data-path", "/data/web"});
    EXPECT_EQ(told.err.find("warning"), std::string::npos) << told.err;
}
