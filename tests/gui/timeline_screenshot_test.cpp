// End to end: `trident-gui --screenshot out.png FILE` on a known trace, then the picture is
// read back. The window's layout (tabs, menus) is not this test's business, so the timeline is
// found in the picture by its colours: the first forward pixel is t = 0, the last optimizer
// pixel ends the step, and the known events and bubbles are checked at their times.
#include "timeline_colors.h"

#include <QImage>
#include <QProcess>
#include <QTemporaryDir>
#include <gtest/gtest.h>
#include <optional>
#include <vector>

namespace trident::gui {
namespace {

const QString kTraces = QStringLiteral(TRIDENT_FIXTURES "/traces/");

QImage screenshot(const QStringList& arguments, const QTemporaryDir& dir) {
    const QString out = dir.filePath("shot.png");
    QProcess gui;
    gui.setProcessChannelMode(QProcess::MergedChannels);
    gui.start(QStringLiteral(TRIDENT_GUI_BINARY), QStringList{"--screenshot", out} + arguments);
    EXPECT_TRUE(gui.waitForFinished(60000));
    EXPECT_EQ(gui.exitCode(), 0) << gui.readAll().toStdString();
    return QImage(out);
}

// Vertical runs [top, bottom] of `color` in column x.
std::vector<std::pair<int, int>> runs_in_column(const QImage& image, int x, QColor color) {
    std::vector<std::pair<int, int>> runs;
    for (int y = 0; y < image.height(); ++y) {
        if (image.pixelColor(x, y) != color) continue;
        if (!runs.empty() && runs.back().second == y - 1) {
            runs.back().second = y;
        } else {
            runs.emplace_back(y, y);
        }
    }
    return runs;
}

std::optional<int> first_column_with(const QImage& image, QColor color, bool from_right) {
    for (int i = 0; i < image.width(); ++i) {
        const int x = from_right ? image.width() - 1 - i : i;
        if (!runs_in_column(image, x, color).empty()) return x;
    }
    return std::nullopt;
}

class Screenshot : public ::testing::Test {
protected:
    void SetUp() override {
        if (QString(TRIDENT_GUI_BINARY).isEmpty()) GTEST_SKIP() << "trident-gui is not built";
        ASSERT_TRUE(dir.isValid());
    }
    QTemporaryDir dir;
};

TEST_F(Screenshot, TimelineOfAKnownTrace) {
    const QImage image =
        screenshot({"--size", "1200x600", "--view", "timeline", kTraces + "two_stages.json"}, dir);
    ASSERT_EQ(image.size(), QSize(1200, 600));
    const QColor forward = kind_color(core::EventKind::forward);
    const QColor backward = kind_color(core::EventKind::backward_input);
    const std::optional<int> x_start = first_column_with(image, forward, false);
    const std::optional<int> x_end = first_column_with(image, idle_color(), true);
    ASSERT_TRUE(x_start && x_end);
    // The step is 8.5 ms; rank 1's final bubble [7.7, 8.5] ends it.
    const double px_per_ms = (*x_end + 1 - *x_start) / 8.5;
    auto x_at = [&](double t_ms) { return *x_start + static_cast<int>(t_ms * px_per_ms); };

    // At t = 1.9 ms both ranks run a forward (away from the centres, which carry the
    // micro-batch numbers): one compute row per rank, two lanes.
    const auto forwards = runs_in_column(image, x_at(1.9), forward);
    ASSERT_EQ(forwards.size(), 2u);
    const int rank0_y = (forwards[0].first + forwards[0].second) / 2;
    const int rank1_y = (forwards[1].first + forwards[1].second) / 2;
    EXPECT_LT(rank0_y, rank1_y);

    EXPECT_EQ(image.pixelColor(x_at(3.0), rank0_y), idle_color()); // bubble [2, 4]
    EXPECT_EQ(image.pixelColor(x_at(0.6), rank1_y), idle_color()); // bubble [0, 1.2]
    EXPECT_EQ(image.pixelColor(x_at(8.1), rank1_y), idle_color()); // bubble [7.7, 8.5]
    EXPECT_EQ(image.pixelColor(x_at(4.5), rank0_y), backward);     // [4, 6]
    EXPECT_EQ(image.pixelColor(x_at(3.6), rank1_y), backward);     // [3.2, 5.2]
    EXPECT_EQ(image.pixelColor(x_at(7.45), rank1_y), kind_color(core::EventKind::optimizer));
    EXPECT_EQ(image.pixelColor(x_at(0.25), rank0_y), forward);
}

TEST_F(Screenshot, CompareShowsBothTimelines) {
    const QImage image =
        screenshot({"--size", "1200x800", "--view", "compare", kTraces + "two_stages.json",
                    kTraces + "two_stages_slower.json"},
                   dir);
    ASSERT_EQ(image.size(), QSize(1200, 800));
    const std::optional<int> x_start =
        first_column_with(image, kind_color(core::EventKind::forward), false);
    ASSERT_TRUE(x_start);
    // Just after t = 0 (right of the legend's swatches) only rank 0 computes: one forward row in
    // each of the two timelines.
    EXPECT_EQ(runs_in_column(image, *x_start + 20, kind_color(core::EventKind::forward)).size(),
              2u);
    // Both timelines show their idle bubbles.
    EXPECT_GE(runs_in_column(image, *x_start + 20, idle_color()).size(), 2u);
}

} // namespace
} // namespace trident::gui
