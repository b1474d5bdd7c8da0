// `trident profile --backend cuda` where it cannot measure: with TRIDENT_CUDA off the build
// says it has no CUDA; with it on but no GPU visible, one line names --backend and the reason.
// Either way exit 2, nothing written. On a machine with a GPU the test skips (the device check
// runs the real profiler there).
#include "../support/trident_process.h"

#include <algorithm>
#include <filesystem>
#include <gtest/gtest.h>

using trident::test::run_trident;

namespace {

bool gpu_device_node_present() {
    return std::filesystem::exists("/dev/nvidia0") || std::filesystem::exists("/dev/dxg");
}

TEST(ProfileCudaBackend, RefusesWithOneLineWhereItCannotMeasure) {
    if (TRIDENT_WITH_CUDA && gpu_device_node_present())
        GTEST_SKIP() << "a GPU is present: tests/gpu/device-check.sh runs the CUDA profiler";
    const std::string out =
        (std::filesystem::temp_directory_path() / "trident-profile-cuda-test.json").string();
    std::filesystem::remove(out);
    const auto r = run_trident({"profile", "--backend", "cuda", "--quick", "--out", out});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    const std::string expected = TRIDENT_WITH_CUDA
                                     ? "trident: error: --backend: no CUDA device visible"
                                     : "trident: error: --backend: cuda is not in this build";
    EXPECT_EQ(r.err.rfind(expected, 0), 0u) << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
    EXPECT_FALSE(std::filesystem::exists(out));
}

TEST(ProfileCudaBackend, UnknownBackendNamesTheChoices) {
    const auto r = run_trident({"profile", "--backend", "tpu"});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_EQ(r.err, "trident: error: --backend: \"tpu\" is not a backend: cpu or cuda\n");
}

} // namespace
