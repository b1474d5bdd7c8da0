// The planner panel driven as a user would: pick presets, click Run, wait, sort, select.
#include "memory_chart.h"
#include "planner_panel.h"
#include "planner_table_model.h"
#include "timeline_view.h"
#include "trident/core/job_loader.h"
#include "trident/core/presets.h"
#include "trident/core/units.h"

#include <QComboBox>
#include <QFile>
#include <QHeaderView>
#include <QJsonDocument>
#include <QLabel>
#include <QLineEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QSignalSpy>
#include <QSpinBox>
#include <QTableView>
#include <QTemporaryDir>
#include <QTest>
#include <QTimer>
#include <gtest/gtest.h>

namespace trident::gui {
namespace {

void choose(QComboBox* box, const QString& text) {
    const int index = box->findText(text);
    ASSERT_GE(index, 0) << text.toStdString() << " is not in the list";
    box->setCurrentIndex(index);
}

// Clicks Run and waits for the worker; returns whether candidates were found.
bool click_run_and_wait(PlannerPanel& panel, int timeout_ms = 20000) {
    QSignalSpy finished(&panel, &PlannerPanel::plan_finished);
    QTest::mouseClick(panel.run_button(), Qt::LeftButton);
    if (finished.isEmpty() && !finished.wait(timeout_ms)) {
        ADD_FAILURE() << "the planner did not finish";
        return false;
    }
    return finished.front().front().toBool();
}

void click_header(QTableView* view, int column) {
    QHeaderView* header = view->horizontalHeader();
    const QPoint at(header->sectionViewportPosition(column) + header->sectionSize(column) / 2,
                    header->height() / 2);
    QTest::mouseClick(header->viewport(), Qt::LeftButton, {}, at);
}

std::vector<double> column_values(QTableView* view, int column) {
    std::vector<double> values;
    for (int row = 0; row < view->model()->rowCount(); ++row)
        values.push_back(
            view->model()->index(row, column).data(PlannerTableModel::kSortRole).toDouble());
    return values;
}

class PlannerPanelTest : public ::testing::Test {
protected:
    void SetUp() override {
        panel.resize(1400, 900);
        panel.show();
        choose(panel.model_box(), "gpt2-124m");
        choose(panel.cluster_box(), "dgx-h100");
        panel.nodes_box()->setValue(1);
        panel.devices_per_node_box()->setValue(8);
    }
    PlannerPanel panel;
};

TEST_F(PlannerPanelTest, RunFillsTheTableInThePlannersOrder) {
    ASSERT_TRUE(click_run_and_wait(panel)) << panel.message().toStdString();
    EXPECT_FALSE(panel.has_error());
    EXPECT_TRUE(panel.run_button()->isEnabled());
    EXPECT_FALSE(panel.cancel_button()->isEnabled());
    EXPECT_EQ(panel.progress_bar()->value(), panel.progress_bar()->maximum());
    QTableView* view = panel.table_view();
    ASSERT_GT(view->model()->rowCount(), 1);
    EXPECT_EQ(view->model()->columnCount(), PlannerTableModel::column_count);
    const std::vector<double> step = column_values(view, PlannerTableModel::step_time);
    // Fastest first; the planner calls times within 1e-9 equal and ranks those by memory.
    for (std::size_t i = 1; i < step.size(); ++i) EXPECT_LE(step[i - 1], step[i] + 1e-9) << i;
    // The default budget is the whole H100 (the model counts the allocator's reserve, the
    // CUDA context and NCCL's buffers itself).
    EXPECT_NEAR(panel.memory_budget_bytes() / core::kGiB, 79.65, 0.05);
    EXPECT_LT(panel.results().candidate(0).peak_memory_bytes, panel.memory_budget_bytes());
}

TEST_F(PlannerPanelTest, ClickingAHeaderSortsAndClickingAgainReverses) {
    ASSERT_TRUE(click_run_and_wait(panel));
    QTableView* view = panel.table_view();
    click_header(view, PlannerTableModel::peak_memory);
    const Qt::SortOrder first = view->horizontalHeader()->sortIndicatorOrder();
    std::vector<double> peak = column_values(view, PlannerTableModel::peak_memory);
    if (first == Qt::DescendingOrder) std::reverse(peak.begin(), peak.end());
    EXPECT_TRUE(std::is_sorted(peak.begin(), peak.end()));
    EXPECT_LT(peak.front(), peak.back()) << "candidates differ in memory";

    click_header(view, PlannerTableModel::peak_memory);
    EXPECT_NE(view->horizontalHeader()->sortIndicatorOrder(), first);
    std::vector<double> again = column_values(view, PlannerTableModel::peak_memory);
    std::reverse(again.begin(), again.end());
    EXPECT_EQ(again, peak);
}

TEST_F(PlannerPanelTest, SelectingACandidateShowsItsTimelineAndMemoryPerStage) {
    ASSERT_TRUE(click_run_and_wait(panel));
    QTableView* view = panel.table_view();
    // Deepest pipeline first, so the memory chart has more than one bar to count.
    click_header(view, PlannerTableModel::pp);
    if (view->horizontalHeader()->sortIndicatorOrder() == Qt::AscendingOrder)
        click_header(view, PlannerTableModel::pp);
    const QModelIndex top = view->model()->index(0, PlannerTableModel::tp);
    const int pp = view->model()->index(0, PlannerTableModel::pp).data().toInt();
    ASSERT_GT(pp, 1) << "gpt2-124m on 8 GPUs has pipelined candidates";

    QSignalSpy shown(&panel, &PlannerPanel::candidate_shown);
    QTest::mouseClick(view->viewport(), Qt::LeftButton, {}, view->visualRect(top).center());
    ASSERT_FALSE(shown.isEmpty());
    const int candidate = shown.back().front().toInt();
    EXPECT_EQ(panel.results().candidate(candidate).job.plan.pp, pp);

    EXPECT_FALSE(panel.timeline()->model().events().empty());
    EXPECT_FALSE(panel.timeline()->title().isEmpty());
    EXPECT_EQ(panel.timeline()->model().stage_count(), pp);
    EXPECT_EQ(panel.memory_chart()->bar_count(), pp);
    EXPECT_DOUBLE_EQ(panel.memory_chart()->budget_bytes(), panel.memory_budget_bytes());
    ASSERT_TRUE(panel.shown_report());
    for (int s = 0; s < pp; ++s)
        EXPECT_DOUBLE_EQ(panel.memory_chart()->stages()[std::size_t(s)].total_bytes(),
                         panel.shown_report()->stages[std::size_t(s)].memory.total_bytes());
}

TEST_F(PlannerPanelTest, SavePlanWritesAPlanFileThatLoads) {
    ASSERT_TRUE(click_run_and_wait(panel));
    ASSERT_TRUE(panel.save_button()->isEnabled()) << "the first candidate is selected";
    QTemporaryDir dir;
    const QString path = dir.filePath("plan.json");
    ASSERT_TRUE(panel.save_plan(path)) << panel.message().toStdString();
    core::JobInputs inputs;
    inputs.plan = path.toStdString();
    const core::JobSpec job = core::load_job(inputs);
    EXPECT_EQ(job.plan.tp, panel.shown_candidate()->job.plan.tp);
    EXPECT_EQ(job.plan.pp, panel.shown_candidate()->job.plan.pp);
    EXPECT_EQ(job.model.name, "gpt2-124m");
}

TEST_F(PlannerPanelTest, BadInputIsOneLineInThePanel) {
    panel.model_box()->setCurrentText("no-such-model");
    EXPECT_FALSE(click_run_and_wait(panel));
    EXPECT_TRUE(panel.has_error());
    EXPECT_TRUE(panel.message().startsWith("model")) << panel.message().toStdString();
    EXPECT_FALSE(panel.message().contains('\n'));
    EXPECT_TRUE(panel.run_button()->isEnabled());

    choose(panel.model_box(), "gpt2-124m");
    panel.budget_edit()->setText("lots");
    EXPECT_FALSE(click_run_and_wait(panel));
    EXPECT_TRUE(panel.message().startsWith("memory budget")) << panel.message().toStdString();

    panel.model_box()->setCurrentText(TRIDENT_FIXTURES "/bad/model_syntax.json");
    panel.budget_edit()->setText("90%");
    EXPECT_FALSE(click_run_and_wait(panel));
    EXPECT_TRUE(panel.has_error());
    EXPECT_FALSE(panel.message().contains('\n')) << panel.message().toStdString();
}

TEST_F(PlannerPanelTest, AModelFileWorksLikeItsPreset) {
    ASSERT_TRUE(click_run_and_wait(panel));
    const double preset_step = panel.results().candidate(0).step_time_s;
    // The preset's own text as a file, typed into the box as a user would after "File…".
    QTemporaryDir dir;
    const QString path = dir.filePath("my-model.json");
    QFile file(path);
    ASSERT_TRUE(file.open(QIODevice::WriteOnly));
    const std::string_view text = core::find_preset(core::PresetKind::model, "gpt2-124m")->text;
    file.write(text.data(), qint64(text.size()));
    file.close();
    panel.model_box()->setCurrentText(path);
    ASSERT_TRUE(click_run_and_wait(panel)) << panel.message().toStdString();
    EXPECT_DOUBLE_EQ(panel.results().candidate(0).step_time_s, preset_step);
}

TEST_F(PlannerPanelTest, NothingFitsSaysHowMuchTheSmallestNeeds) {
    choose(panel.model_box(), "llama3-70b");
    panel.budget_edit()->setText("1GiB");
    EXPECT_FALSE(click_run_and_wait(panel));
    EXPECT_TRUE(panel.message().contains("no layout fits in 1.0 GiB"))
        << panel.message().toStdString();
    EXPECT_EQ(panel.table_view()->model()->rowCount(), 0);
}

TEST_F(PlannerPanelTest, CancelStopsALongSearchAndTheWindowKeepsResponding) {
    // About a second of search: megatron-gpt-1t on 3072 DGX A100 nodes.
    choose(panel.model_box(), "megatron-gpt-1t");
    choose(panel.cluster_box(), "dgx-a100-80gb");
    panel.nodes_box()->setValue(3072);
    panel.global_batch_box()->setValue(3072);
    panel.seq_length_box()->setValue(2048);
    QSignalSpy finished(&panel, &PlannerPanel::plan_finished);
    QTest::mouseClick(panel.run_button(), Qt::LeftButton);
    EXPECT_TRUE(panel.running());
    EXPECT_FALSE(panel.run_button()->isEnabled());
    ASSERT_TRUE(panel.cancel_button()->isEnabled());
    // The window keeps responding while the worker searches: a zero-timer fires, and the
    // worker's progress reaches the bar through the event loop.
    bool ticked = false;
    QTimer::singleShot(0, &panel, [&] { ticked = true; });
    EXPECT_TRUE(QTest::qWaitFor([&] { return ticked; }, 1000));
    EXPECT_TRUE(QTest::qWaitFor([&] { return panel.progress_bar()->maximum() > 0; }, 5000))
        << "no progress arrived";
    EXPECT_TRUE(panel.running()) << "the search should take about a second";
    QTest::mouseClick(panel.cancel_button(), Qt::LeftButton);
    ASSERT_TRUE(!finished.isEmpty() || finished.wait(20000));
    EXPECT_FALSE(panel.running());
    EXPECT_TRUE(panel.run_button()->isEnabled());
    EXPECT_FALSE(panel.has_error()) << panel.message().toStdString();
    EXPECT_TRUE(panel.message().contains("cancelled")) << panel.message().toStdString();
}

TEST_F(PlannerPanelTest, DestroyingThePanelDuringASearchCancelsIt) {
    auto other = std::make_unique<PlannerPanel>();
    choose(other->model_box(), "megatron-gpt-1t");
    choose(other->cluster_box(), "dgx-a100-80gb");
    other->nodes_box()->setValue(3072);
    other->global_batch_box()->setValue(3072);
    other->seq_length_box()->setValue(2048);
    other->run();
    EXPECT_TRUE(other->running());
    other.reset();    // must neither crash nor hang
    QTest::qWait(50); // progress posted to the dead panel must be dropped
}

TEST(PlannerPanelControls, AClusterPresetFillsItsSize) {
    PlannerPanel panel;
    choose(panel.cluster_box(), "localhost");
    choose(panel.cluster_box(), "dgx-h100");
    EXPECT_EQ(panel.nodes_box()->value(), 1);
    EXPECT_EQ(panel.devices_per_node_box()->value(), 8);
    const PlannerRequest r = panel.request();
    EXPECT_EQ(r.cluster, "dgx-h100");
    EXPECT_EQ(r.memory_budget, "100%");
}

} // namespace
} // namespace trident::gui
