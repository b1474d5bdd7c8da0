// The planner's choice runs: on this machine's `localhost` cluster (4 ranks), a CPU profile
// measured by `trident profile`, then `trident plan --out` for each test-sized preset, then
// `mpirun … trident run --plan` of the chosen plan — which must start with exactly that layout
// (the schedule, degrees and micro-batches the plan names) and train.
#include "../support/trident_process.h"

#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <sstream>
#include <string>

namespace fs = std::filesystem;
using trident::test::run_shell;

namespace {

const std::string kMpirun = "mpirun --allow-run-as-root --oversubscribe -np 4 ";

// A CPU profile of this machine (measuring it is most of this test's time).
std::string measure_profile() {
    const fs::path dir = fs::path(testing::TempDir()) / "trident-plan-then-run";
    fs::create_directories(dir);
    const std::string file = (dir / "cpu-host.json").string();
    const auto r =
        run_shell(kMpirun + TRIDENT_BINARY + " profile --backend cpu --quick --out " + file);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return file;
}

// The "training …" line's layout part, e.g. "tp 1 · pp 2 · dp 2, dualpipe, 4 micro-batches".
std::string training_line(const std::string& out) {
    std::istringstream in(out);
    for (std::string line; std::getline(in, line);)
        if (line.rfind("training ", 0) == 0) return line;
    return {};
}

// One test for every preset: ctest runs each test in its own process, and the profile is
// measured once.
TEST(PlanThenRun, TheChosenPlanTrainsForEachTinyPreset) {
    const std::string profile = measure_profile();
    for (const std::string model :
         {"gpt-tiny", "llama-tiny", "moe-tiny", "qwen-moe-tiny", "deepseek-tiny"}) {
        const std::string plan = (fs::path(testing::TempDir()) / (model + "-plan.json")).string();
        const auto planned = run_shell(std::string(TRIDENT_BINARY) + " plan --model " + model +
                                       " --cluster localhost --devices-per-node 4 --profile " +
                                       profile + " --mbs 2 --gbs 16 --seq-length 32 --out " + plan);
        ASSERT_EQ(planned.exit_code, 0) << model << "\n" << planned.err;
        // The table's first row is the plan written: its schedule must be the one run.
        std::istringstream rows(planned.out);
        std::string row, schedule;
        while (std::getline(rows, row))
            if (row.rfind("  1 ", 0) == 0) {
                std::istringstream words(row);
                std::string w;
                for (int i = 0; i < 9 && words >> w; ++i) schedule = w; // column 9: schedule
                break;
            }
        ASSERT_FALSE(schedule.empty()) << planned.out;
        const auto ran = run_shell(kMpirun + TRIDENT_BINARY + " run --plan " + plan +
                                   " --profile " + profile + " --steps 3");
        ASSERT_EQ(ran.exit_code, 0) << model << "\n" << ran.err;
        const std::string training = training_line(ran.out);
        EXPECT_NE(training.find(", " + schedule + ","), std::string::npos)
            << model << ": " << training << " (planned " << schedule << ")";
        EXPECT_NE(ran.out.find("step 3/3 | loss "), std::string::npos) << ran.out;
    }
}

} // namespace
