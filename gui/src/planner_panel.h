#pragma once
// PlannerPanel: choose a model, a cluster, the training shape and a memory budget (presets
// from the lists or files), run the planner in a worker thread with a progress bar and a
// Cancel button, and browse the candidates in a sortable table. Selecting a candidate
// simulates it and shows its timeline and its memory per pipeline stage against the budget.
// Bad input and "nothing fits" are one line in the panel, never a crash.
#include "planner_search.h"
#include "planner_table_model.h"
#include "trident/simulator/simulate.h"

#include <QFutureWatcher>
#include <QWidget>
#include <atomic>
#include <memory>
#include <optional>

class QComboBox;
class QLabel;
class QLineEdit;
class QProgressBar;
class QPushButton;
class QSortFilterProxyModel;
class QSpinBox;
class QTableView;

namespace trident::gui {

class MemoryChart;
class TimelineView;
class WhatIfPanel;

class PlannerPanel : public QWidget {
    Q_OBJECT
public:
    explicit PlannerPanel(QWidget* parent = nullptr);
    // Cancels a running search and waits for it: the worker calls back into the panel.
    ~PlannerPanel() override;

    PlannerRequest request() const;
    void set_request(const PlannerRequest& request);

    // Shows a job simulated elsewhere (an opened plan file) and fills the controls with its
    // specs, so Run searches the same model and cluster.
    void show_simulated_job(const simulator::Report& report, const QString& title);

    bool running() const;
    QString message() const; // the last error or summary line
    bool has_error() const { return has_error_; }
    const PlannerTableModel& results() const { return *table_model_; }
    const std::optional<planner::Candidate>& shown_candidate() const { return shown_; }
    const std::optional<simulator::Report>& shown_report() const { return shown_report_; }
    double memory_budget_bytes() const { return budget_bytes_; }

    // Writes the shown candidate as a trident.plan/1 file; false (and the reason in the
    // panel) when nothing is shown or the file cannot be written.
    bool save_plan(const QString& path);

    // The controls, for tests that drive the panel as a user would.
    QComboBox* model_box() const { return model_box_; }
    QComboBox* cluster_box() const { return cluster_box_; }
    QSpinBox* nodes_box() const { return nodes_box_; }
    QSpinBox* devices_per_node_box() const { return devices_per_node_box_; }
    QSpinBox* global_batch_box() const { return global_batch_box_; }
    QSpinBox* seq_length_box() const { return seq_length_box_; }
    QLineEdit* budget_edit() const { return budget_edit_; }
    QComboBox* profile_box() const { return profile_box_; }
    // The profile field as typed: a preset, a file, or empty (the search order).
    std::string profile() const;
    QPushButton* run_button() const { return run_button_; }
    QPushButton* cancel_button() const { return cancel_button_; }
    QPushButton* save_button() const { return save_button_; }
    QProgressBar* progress_bar() const { return progress_bar_; }
    QTableView* table_view() const { return table_view_; }
    QLabel* message_label() const { return message_label_; }
    TimelineView* timeline() const { return timeline_; }
    MemoryChart* memory_chart() const { return memory_chart_; }
    WhatIfPanel* what_if() const { return what_if_; }

public slots:
    void run();
    void cancel();
    void save_plan_with_dialog();

signals:
    void plan_finished(bool found_candidates);
    void candidate_shown(int candidate_index); // index in the planner's ranking
    void status_message(const QString& text);

private:
    void build_controls();
    void show_progress(const QString& phase, qint64 done, qint64 total);
    void finish_run();
    void show_candidate(int candidate_index);
    void show_error(const QString& text);
    void show_info(const QString& text);
    void fill_cluster_size(const QString& cluster);
    void browse(QComboBox* box, const QString& title);

    QComboBox* model_box_ = nullptr;
    QComboBox* cluster_box_ = nullptr;
    QSpinBox* nodes_box_ = nullptr;
    QSpinBox* devices_per_node_box_ = nullptr;
    QSpinBox* global_batch_box_ = nullptr;
    QSpinBox* seq_length_box_ = nullptr;
    QLineEdit* budget_edit_ = nullptr;
    QComboBox* profile_box_ = nullptr;
    QPushButton* run_button_ = nullptr;
    QPushButton* cancel_button_ = nullptr;
    QPushButton* save_button_ = nullptr;
    QProgressBar* progress_bar_ = nullptr;
    QLabel* message_label_ = nullptr;
    QTableView* table_view_ = nullptr;
    PlannerTableModel* table_model_ = nullptr;
    QSortFilterProxyModel* sort_model_ = nullptr;
    TimelineView* timeline_ = nullptr;
    MemoryChart* memory_chart_ = nullptr;
    WhatIfPanel* what_if_ = nullptr;

    QFutureWatcher<PlannerOutcome> watcher_;
    std::shared_ptr<std::atomic<bool>> cancel_flag_;
    std::optional<PlannerJob> job_; // of the last successful search
    double budget_bytes_ = 0.0;
    std::optional<planner::Candidate> shown_;
    std::optional<simulator::Report> shown_report_;
    bool has_error_ = false;
};

} // namespace trident::gui
