// Rank 0's progress bar under mpirun: drawn (redrawn in place with "\r") when the launcher's
// stderr is a terminal — here a pseudo-terminal from script(1) — and never into a pipe or file.
#include "../support/trident_process.h"

#include <gtest/gtest.h>
#include <string>

using trident::test::run_shell;

namespace {

const std::string kJob = "mpirun --allow-run-as-root --oversubscribe -np 2 " +
                         std::string(TRIDENT_BINARY) +
                         " run --model gpt-tiny --cluster localhost --devices-per-node 2 --dp 2 "
                         "--mbs 2 --gbs 8 --seq-length 16 --train-iters 3";

} // namespace

TEST(ProgressBar, DrawnUnderMpirunWhenTheLauncherHasATerminal) {
    const auto r = run_shell("script -qec '" + kJob + "' /dev/null");
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    EXPECT_NE(r.out.find("\r[############################] 100% 3/3 steps"), std::string::npos)
        << r.out;
    EXPECT_NE(r.out.find("summary: 3 steps"), std::string::npos) << r.out;
}

TEST(ProgressBar, NeverWrittenIntoAPipe) {
    const auto r = run_shell(kJob);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ((r.out + r.err).find("\r["), std::string::npos) << r.err;
}
