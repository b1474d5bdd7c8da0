// MainWindow: files recognised by content, bad files as one line, compare, save and export.
#include "compare_view.h"
#include "main_window.h"
#include "memory_chart.h"
#include "planner_panel.h"
#include "timeline_view.h"
#include "trident/core/job_loader.h"
#include "trident/core/json_io.h"

#include <QComboBox>
#include <QFile>
#include <QImage>
#include <QTabWidget>
#include <QTemporaryDir>
#include <gtest/gtest.h>

namespace trident::gui {
namespace {

const QString kTraces = TRIDENT_FIXTURES "/traces/";

class MainWindowTest : public ::testing::Test {
protected:
    void SetUp() override {
        window.resize(1200, 800);
        window.show();
    }
    MainWindow window;
    QTemporaryDir dir;
};

TEST_F(MainWindowTest, ATraceOpensOnTheTimelineTab) {
    window.show_view(MainWindow::View::planner);
    ASSERT_TRUE(window.open_file(kTraces + "main_pp2_trace.json"))
        << window.last_error().toStdString();
    EXPECT_EQ(window.current_view(), MainWindow::View::timeline);
    EXPECT_EQ(window.tabs()->currentWidget(), window.timeline());
    EXPECT_FALSE(window.timeline()->model().events().empty());
    EXPECT_EQ(window.timeline()->model().lanes(false).size(), 2u) << "one lane per rank";
    EXPECT_TRUE(window.timeline()->title().contains("main_pp2_trace.json"));
    EXPECT_TRUE(window.last_error().isEmpty());
}

TEST_F(MainWindowTest, APlanIsSimulatedAndLoadedIntoThePlanner) {
    ASSERT_TRUE(window.open_file(kTraces + "main_pp2_plan.json"))
        << window.last_error().toStdString();
    EXPECT_EQ(window.current_view(), MainWindow::View::timeline);
    EXPECT_EQ(window.timeline()->model().stage_count(), 2);
    EXPECT_EQ(window.planner()->memory_chart()->bar_count(), 2);
    EXPECT_GT(window.planner()->memory_chart()->budget_bytes(), 0.0);
    EXPECT_EQ(window.planner()->model_box()->currentText(), "gpt2-124m");
    EXPECT_EQ(window.planner()->request().devices_per_node, 2);
    EXPECT_EQ(window.planner()->request().global_batch_size, 4);
}

TEST_F(MainWindowTest, AReportShowsItsJobsTimeline) {
    ASSERT_TRUE(window.open_file(kTraces + "main_pp2_report.json"))
        << window.last_error().toStdString();
    EXPECT_EQ(window.timeline()->model().stage_count(), 2);
    EXPECT_FALSE(window.timeline()->model().events().empty());
}

TEST_F(MainWindowTest, BadFilesAreOneLineAndKeepWhatWasShown) {
    ASSERT_TRUE(window.open_file(kTraces + "main_pp2_trace.json"));
    const std::size_t events = window.timeline()->model().events().size();
    for (const char* name :
         {"main_truncated.json", "main_wrong_format.json", "no_such_file.json"}) {
        EXPECT_FALSE(window.open_file(kTraces + name)) << name;
        const QString error = window.last_error();
        EXPECT_TRUE(error.contains(name)) << error.toStdString();
        EXPECT_FALSE(error.contains('\n')) << error.toStdString();
    }
    EXPECT_FALSE(window.open_file(TRIDENT_FIXTURES "/bad/plan_heads_tp.json"));
    EXPECT_FALSE(window.last_error().isEmpty());
    EXPECT_EQ(window.timeline()->model().events().size(), events);
    EXPECT_FALSE(window.open_compare_file(kTraces + "main_truncated.json"));
}

TEST_F(MainWindowTest, ASecondTraceOpensTheCompareView) {
    ASSERT_TRUE(window.open_file(kTraces + "main_pp2_trace.json"));
    ASSERT_TRUE(window.open_compare_file(kTraces + "main_pp2_mbs2_trace.json"))
        << window.last_error().toStdString();
    EXPECT_EQ(window.current_view(), MainWindow::View::compare);
    EXPECT_EQ(window.tabs()->currentWidget(), window.compare());
}

TEST_F(MainWindowTest, ExportsTheTimelineAsPngAndSvg) {
    ASSERT_TRUE(window.open_file(kTraces + "main_pp2_trace.json"));
    const QString png = dir.filePath("timeline.png"), svg = dir.filePath("timeline.svg");
    ASSERT_TRUE(window.export_png(png)) << window.last_error().toStdString();
    ASSERT_TRUE(window.export_svg(svg)) << window.last_error().toStdString();
    EXPECT_FALSE(QImage(png).isNull());
    QFile file(svg);
    ASSERT_TRUE(file.open(QIODevice::ReadOnly));
    EXPECT_TRUE(file.readAll().contains("<svg"));
}

TEST_F(MainWindowTest, ExportsThePlannerAsPngAndItsMemoryChartAsSvg) {
    window.show_view(MainWindow::View::planner);
    EXPECT_FALSE(window.export_svg(dir.filePath("empty.svg"))) << "no candidate yet";
    EXPECT_FALSE(window.last_error().isEmpty());
    ASSERT_TRUE(window.open_file(kTraces + "main_pp2_plan.json"));
    window.show_view(MainWindow::View::planner);
    const QString png = dir.filePath("planner.png"), svg = dir.filePath("memory.svg");
    ASSERT_TRUE(window.export_png(png)) << window.last_error().toStdString();
    ASSERT_TRUE(window.export_svg(svg)) << window.last_error().toStdString();
    const QImage image(png);
    EXPECT_EQ(image.size(), window.planner()->size());
    QFile file(svg);
    ASSERT_TRUE(file.open(QIODevice::ReadOnly));
    const QByteArray text = file.readAll();
    EXPECT_TRUE(text.contains(">stage 0<") && text.contains(">stage 1<"));
    EXPECT_FALSE(window.export_png("/no/such/dir/x.png"));
    EXPECT_FALSE(window.last_error().isEmpty());
}

TEST_F(MainWindowTest, SavesTraceReportAndPlanOfAnOpenedPlan) {
    EXPECT_FALSE(window.save_file(dir.filePath("nothing.json"), MainWindow::SaveKind::trace));
    ASSERT_TRUE(window.open_file(kTraces + "main_pp2_plan.json"));
    const QString trace = dir.filePath("trace.json"), report = dir.filePath("report.json"),
                  plan = dir.filePath("plan.json");
    ASSERT_TRUE(window.save_file(trace, MainWindow::SaveKind::trace))
        << window.last_error().toStdString();
    ASSERT_TRUE(window.save_file(report, MainWindow::SaveKind::report))
        << window.last_error().toStdString();
    ASSERT_TRUE(window.save_file(plan, MainWindow::SaveKind::plan))
        << window.last_error().toStdString();
    const std::size_t events = window.timeline()->model().events().size();

    // Each written file opens again as what it is.
    MainWindow again;
    ASSERT_TRUE(again.open_file(trace)) << again.last_error().toStdString();
    EXPECT_EQ(again.timeline()->model().events().size(), events);
    ASSERT_TRUE(again.open_file(report)) << again.last_error().toStdString();
    EXPECT_EQ(again.timeline()->model().events().size(), events);
    core::JobInputs inputs;
    inputs.plan = plan.toStdString();
    EXPECT_EQ(core::load_job(inputs).plan.pp, 2);
    EXPECT_EQ(core::read_json_file(report.toStdString(), "report")["format"], "trident.report/1");
}

} // namespace
} // namespace trident::gui
