// --distributed-timeout-minutes under mpirun: one rank stalled on purpose (TRIDENT_FAULT_STALL)
// makes the job end well before the stall would, with exit code 4 and one line naming the
// operation, the group, the step and the rank that did not arrive; a rank that is only late
// (back before the timeout) ends nothing.
#include "../support/trident_process.h"

#include <chrono>
#include <gtest/gtest.h>
#include <string>

using trident::test::CommandResult;
using trident::test::run_shell;

namespace {

std::string job(int ranks, const std::string& layout) {
    return "mpirun --allow-run-as-root --oversubscribe -np " + std::to_string(ranks) + " " +
           TRIDENT_BINARY + " run --model gpt-tiny --cluster localhost --devices-per-node " +
           std::to_string(ranks) + " --mbs 2 --gbs 8 --seq-length 16 --train-iters 4 " + layout;
}

struct Timed {
    CommandResult result;
    double seconds = 0.0;
};

Timed run_timed(const std::string& command) {
    const auto begin = std::chrono::steady_clock::now();
    Timed t{run_shell(command), 0.0};
    t.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
    return t;
}

std::size_t count_of(const std::string& text, const std::string& what) {
    std::size_t n = 0;
    for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
}

// The one watchdog line of a run (stdout and stderr together), or "".
std::string timeout_line(const CommandResult& r) {
    const std::string head = "trident: error: --distributed-timeout-minutes: ";
    const std::string all = r.out + r.err;
    const auto at = all.find(head);
    if (at == std::string::npos) return "";
    return all.substr(at, all.find('\n', at) - at);
}

} // namespace

// Data parallelism: ranks 0, 2 and 3 wait in a collective of step 2 while rank 1 sleeps 60 s.
TEST(DistributedTimeout, StalledRankInCollectiveEndsTheJob) {
    const auto t = run_timed("TRIDENT_FAULT_STALL=1:2:60 " + job(4, "--dp 4") +
                             " --distributed-timeout-minutes 0.05");
    const std::string line = timeout_line(t.result);
    EXPECT_EQ(t.result.exit_code, 4) << t.result.out << t.result.err;
    EXPECT_LT(t.seconds, 40.0) << "the job waited for the stalled rank";
    EXPECT_EQ(count_of(t.result.out + t.result.err, "--distributed-timeout-minutes:"), 1u)
        << t.result.err;
    EXPECT_NE(line.find("did not complete within 0.05 minutes (step 2)"), std::string::npos)
        << line;
    EXPECT_NE(line.find("group (ranks 0, 1, 2, 3)"), std::string::npos) << line;
    EXPECT_NE(line.find("rank 1 did not arrive (outside communication"), std::string::npos) << line;
    // Steps before the stall completed and were printed.
    EXPECT_NE(t.result.out.find("step 1/4"), std::string::npos) << t.result.out;
}

// Pipeline parallelism: the last stage waits in a receive from the stalled first stage.
TEST(DistributedTimeout, StalledPeerOfAReceiveIsNamed) {
    const auto t = run_timed("TRIDENT_FAULT_STALL=0:3:60 " + job(2, "--pp 2") +
                             " --distributed-timeout-minutes 0.05");
    const std::string line = timeout_line(t.result);
    EXPECT_EQ(t.result.exit_code, 4) << t.result.out << t.result.err;
    EXPECT_LT(t.seconds, 40.0);
    EXPECT_NE(line.find("receive from rank 0 on the pipeline-parallel group (ranks 0, 1)"),
              std::string::npos)
        << line;
    EXPECT_NE(line.find("(step 3): rank 0 did not arrive"), std::string::npos) << line;
}

// A rank back before the timeout is late, not lost: the run finishes normally.
TEST(DistributedTimeout, LateRankWithinTheTimeoutIsNotAnError) {
    const auto t = run_timed("TRIDENT_FAULT_STALL=1:2:1 " + job(2, "--dp 2") +
                             " --distributed-timeout-minutes 0.1");
    EXPECT_EQ(t.result.exit_code, 0) << t.result.err;
    EXPECT_EQ(timeout_line(t.result), "");
    EXPECT_NE(t.result.out.find("step 4/4"), std::string::npos) << t.result.out;
}

TEST(DistributedTimeout, MalformedFaultInjectionIsRefused) {
    const auto r = run_shell("TRIDENT_FAULT_STALL=1:two " + job(2, "--dp 2"));
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find("trident: error: TRIDENT_FAULT_STALL: '1:two' is not RANK:STEP:SECONDS"),
              std::string::npos)
        << r.err;
}
