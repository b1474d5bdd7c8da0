// End to end: the trident-gui binary renders without a display, and `trident gui` finds it
// and forwards its arguments.
#include "../support/trident_process.h"

#include <QImage>
#include <QTemporaryDir>
#include <algorithm>
#include <cstdio>
#include <gtest/gtest.h>
#include <set>

namespace trident::gui {
namespace {

using test::run_shell;

const std::string kTraces = TRIDENT_FIXTURES "/traces/";

std::string quoted(const std::string& s) {
    return "'" + s + "'";
}

// No display and no platform chosen: --screenshot must pick offscreen by itself.
std::string gui(const std::string& args) {
    return std::string("env -u DISPLAY -u WAYLAND_DISPLAY -u QT_QPA_PLATFORM ") +
           quoted(TRIDENT_GUI_BINARY) + " " + args;
}

std::set<QRgb> colours(const QImage& image) {
    std::set<QRgb> seen;
    for (int y = 0; y < image.height(); y += 4)
        for (int x = 0; x < image.width(); x += 4) seen.insert(image.pixel(x, y));
    return seen;
}

class MainWindowScreenshot : public ::testing::Test {
protected:
    void SetUp() override {
        if (std::string(TRIDENT_GUI_BINARY).empty()) GTEST_SKIP() << "trident-gui not built";
    }
    QTemporaryDir dir;
    std::string out(const char* name) const { return dir.filePath(name).toStdString(); }
};

TEST_F(MainWindowScreenshot, RendersATraceWithoutADisplay) {
    const auto r = run_shell(gui("--screenshot " + quoted(out("t.png")) + " --size 800x600 " +
                                 quoted(kTraces + "main_pp2_trace.json")));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.err, "") << "nothing but errors on stderr";
    const QImage image(QString::fromStdString(out("t.png")));
    ASSERT_FALSE(image.isNull());
    EXPECT_EQ(image.size(), QSize(800, 600));
    EXPECT_GT(colours(image).size(), 6u) << "blocks in several colours, not a blank window";
}

TEST_F(MainWindowScreenshot, TwoFilesSideBySideAndThePlannerView) {
    auto r = run_shell(gui("--view compare --screenshot " + quoted(out("c.png")) + " " +
                           quoted(kTraces + "main_pp2_trace.json") + " " +
                           quoted(kTraces + "main_pp2_mbs2_trace.json")));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(QImage(QString::fromStdString(out("c.png"))).size(), QSize(1400, 900));
    r = run_shell(gui("--view planner --screenshot " + quoted(out("p.png")) + " " +
                      quoted(kTraces + "main_pp2_plan.json")));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_FALSE(QImage(QString::fromStdString(out("p.png"))).isNull());
}

TEST_F(MainWindowScreenshot, BadFilesAndArgumentsAreOneLineAndExitTwo) {
    for (const std::string& args :
         {"--screenshot " + quoted(out("x.png")) + " " + quoted(kTraces + "main_truncated.json"),
          "--screenshot " + quoted(out("x.png")) + " /no/such/trace.json",
          "--view sideways " + quoted(kTraces + "main_pp2_trace.json"),
          "--size huge --screenshot " + quoted(out("x.png")),
          "--view compare --screenshot " + quoted(out("x.png")) + " " +
              quoted(kTraces + "main_pp2_trace.json"),
          quoted(kTraces + "main_pp2_trace.json")}) { // no display, no --screenshot
        const auto r = run_shell(gui(args));
        EXPECT_EQ(r.exit_code, 2) << args;
        EXPECT_EQ(r.err.rfind("trident-gui: error: ", 0), 0u) << r.err;
        EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    }
}

TEST_F(MainWindowScreenshot, TridentGuiForwardsItsArgumentsToTheGuiBinary) {
    auto r = test::run_trident({"gui", "--help"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("--screenshot"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("trident-gui"), std::string::npos) << r.out;

    r = run_shell("env -u DISPLAY -u QT_QPA_PLATFORM " + quoted(TRIDENT_BINARY) +
                  " gui --screenshot " + quoted(out("g.png")) + " --size 640x480 " +
                  quoted(kTraces + "main_pp2_trace.json"));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(QImage(QString::fromStdString(out("g.png"))).size(), QSize(640, 480));

    r = run_shell(quoted(TRIDENT_BINARY) + " gui " + quoted(kTraces + "main_truncated.json") +
                  " --screenshot " + quoted(out("y.png")));
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_EQ(r.err.rfind("trident-gui: error: ", 0), 0u) << r.err;
}

TEST(TridentGuiCommand, AMissingGuiIsOneLineAndExitTwo) {
    const auto r = run_shell("TRIDENT_GUI_PATH=/no/such/trident-gui '" TRIDENT_BINARY "' gui");
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_EQ(r.err, "trident: error: TRIDENT_GUI_PATH: /no/such/trident-gui is not an executable "
                     "trident-gui\n");
}

TEST_F(MainWindowScreenshot, ProfileOptionSimulatesALocalhostPlan) {
    // A plan for this machine records no profile; --profile names the measured one, and
    // without it (none in the folder or the user's) the window says how to make one.
    const std::string plan = out("localhost.json");
    FILE* f = std::fopen(plan.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs(R"({"format": "trident.plan/1", "model": "gpt-tiny",
                   "cluster": {"preset": "localhost", "devices_per_node": 1},
                   "training": {"global_batch_size": 8, "seq_length": 32},
                   "parallel": {"micro_batch_size": 2}})",
               f);
    std::fclose(f);
    const std::string profile = TRIDENT_FIXTURES "/profiles/cpu-host-2-ranks.json";
    const std::string cd = "cd " + quoted(dir.path().toStdString()) +
                           " && TRIDENT_PROFILE_DIR=/nonexistent/trident-test-profiles ";
    auto r = run_shell(cd + gui("--profile " + quoted(profile) + " --screenshot " +
                                quoted(out("p.png")) + " " + quoted(plan)));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_FALSE(QImage(QString::fromStdString(out("p.png"))).isNull());
    r = run_shell(cd + gui("--screenshot " + quoted(out("q.png")) + " " + quoted(plan)));
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("no profile for device 'cpu-host'"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("trident profile --backend cpu"), std::string::npos) << r.err;
    r = run_shell(gui("--help"));
    EXPECT_NE(r.out.find("--profile"), std::string::npos) << r.out;
}

} // namespace
} // namespace trident::gui
