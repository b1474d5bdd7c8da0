#include "planner_panel.h"

#include "memory_chart.h"
#include "timeline_view.h"
#include "trident/core/atomic_file.h"
#include "trident/core/presets.h"
#include "trident/core/spec_error.h"
#include "trident/planner/memory_budget.h"
#include "what_if_panel.h"

#include <QComboBox>
#include <QFileDialog>
#include <QGridLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QSortFilterProxyModel>
#include <QSpinBox>
#include <QSplitter>
#include <QTabWidget>
#include <QTableView>
#include <QVBoxLayout>
#include <QtConcurrent/QtConcurrentRun>
#include <chrono>

namespace trident::gui {
namespace {

QStringList preset_list(core::PresetKind kind) {
    QStringList names;
    for (const std::string& name : core::preset_names(kind)) names << QString::fromStdString(name);
    return names;
}

QComboBox* reference_box(core::PresetKind kind, const QString& initial) {
    auto* box = new QComboBox;
    box->setEditable(true); // a preset from the list, or a file path typed or browsed
    box->addItems(preset_list(kind));
    box->setCurrentText(initial);
    box->setInsertPolicy(QComboBox::NoInsert);
    box->setMinimumContentsLength(12);
    return box;
}

QSpinBox* count_box(int minimum, int maximum, int value) {
    auto* box = new QSpinBox;
    box->setRange(minimum, maximum);
    box->setValue(value);
    return box;
}

// Progress posts from the worker at most this often: the planner reports every 64 layouts,
// which for a large search would flood the GUI thread's event queue.
constexpr auto kProgressInterval = std::chrono::milliseconds(40);

} // namespace

PlannerPanel::PlannerPanel(QWidget* parent) : QWidget(parent) {
    build_controls();
    connect(&watcher_, &QFutureWatcher<PlannerOutcome>::finished, this, &PlannerPanel::finish_run);
}

PlannerPanel::~PlannerPanel() {
    if (cancel_flag_) cancel_flag_->store(true);
    watcher_.waitForFinished();
}

void PlannerPanel::build_controls() {
    model_box_ = reference_box(core::PresetKind::model, "gpt2-124m");
    cluster_box_ = reference_box(core::PresetKind::cluster, "dgx-h100");
    nodes_box_ = count_box(1, 100000, 1);
    devices_per_node_box_ = count_box(1, 1024, 8);
    global_batch_box_ = count_box(1, 1 << 24, 64);
    seq_length_box_ = count_box(1, 1 << 22, 1024);
    // Empty: the profile of the cluster's device, found as the command line finds it.
    profile_box_ = reference_box(core::PresetKind::profile, "");
    profile_box_->insertItem(0, "");
    profile_box_->setCurrentText("");
    profile_box_->setToolTip("Device profile: a preset or a trident.profile/1 file; empty for "
                             "./DEVICE.json, the user's profile folder, then the device's preset");
    auto* profile_file = new QPushButton("File…");
    budget_edit_ = new QLineEdit(planner::kDefaultMemoryBudget);
    budget_edit_->setToolTip("Per-device budget: 70GiB, 80GB, 0.9 or 90% of the device");
    auto* model_file = new QPushButton("File…");
    auto* cluster_file = new QPushButton("File…");
    run_button_ = new QPushButton("Run");
    run_button_->setDefault(true);
    cancel_button_ = new QPushButton("Cancel");
    cancel_button_->setEnabled(false);
    save_button_ = new QPushButton("Save plan…");
    save_button_->setEnabled(false);
    progress_bar_ = new QProgressBar;
    progress_bar_->setRange(0, 1);
    progress_bar_->setValue(0);
    progress_bar_->setFormat("%p%");
    message_label_ = new QLabel;
    message_label_->setTextInteractionFlags(Qt::TextSelectableByMouse);

    auto* form = new QGridLayout;
    form->addWidget(new QLabel("Model"), 0, 0);
    form->addWidget(model_box_, 0, 1);
    form->addWidget(model_file, 0, 2);
    form->addWidget(new QLabel("Cluster"), 0, 3);
    form->addWidget(cluster_box_, 0, 4);
    form->addWidget(cluster_file, 0, 5);
    form->addWidget(new QLabel("Nodes"), 0, 6);
    form->addWidget(nodes_box_, 0, 7);
    form->addWidget(new QLabel("Devices/node"), 0, 8);
    form->addWidget(devices_per_node_box_, 0, 9);
    form->addWidget(new QLabel("Global batch"), 1, 0);
    form->addWidget(global_batch_box_, 1, 1);
    form->addWidget(new QLabel("Seq length"), 1, 3);
    form->addWidget(seq_length_box_, 1, 4);
    form->addWidget(new QLabel("Memory budget"), 1, 6);
    form->addWidget(budget_edit_, 1, 7);
    form->addWidget(new QLabel("Profile"), 1, 8);
    form->addWidget(profile_box_, 1, 9);
    form->addWidget(profile_file, 1, 10);
    form->setColumnStretch(11, 1);

    auto* actions = new QHBoxLayout;
    actions->addWidget(run_button_);
    actions->addWidget(cancel_button_);
    actions->addWidget(progress_bar_, 1);
    actions->addWidget(save_button_);

    table_model_ = new PlannerTableModel(this);
    sort_model_ = new QSortFilterProxyModel(this);
    sort_model_->setSourceModel(table_model_);
    sort_model_->setSortRole(PlannerTableModel::kSortRole);
    table_view_ = new QTableView;
    table_view_->setModel(sort_model_);
    table_view_->setSortingEnabled(true);
    table_view_->sortByColumn(-1, Qt::AscendingOrder); // the planner's ranking until clicked
    table_view_->setSelectionBehavior(QAbstractItemView::SelectRows);
    table_view_->setSelectionMode(QAbstractItemView::SingleSelection);
    table_view_->setEditTriggers(QAbstractItemView::NoEditTriggers);
    table_view_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
    table_view_->verticalHeader()->setToolTip("The planner's rank (fastest first)");

    timeline_ = new TimelineView;
    memory_chart_ = new MemoryChart;
    auto* details = new QSplitter(Qt::Horizontal);
    details->addWidget(timeline_);
    details->addWidget(memory_chart_);
    details->setStretchFactor(0, 3);
    details->setStretchFactor(1, 1);
    // The what-if (sizes and tp × pp) beside the chosen candidate's timeline and memory.
    what_if_ = new WhatIfPanel([this] { return request(); });
    auto* tabs = new QTabWidget;
    tabs->addTab(details, "Timeline and memory");
    tabs->addTab(what_if_, "What-if: sizes, tp × pp");
    auto* split = new QSplitter(Qt::Vertical);
    split->addWidget(table_view_);
    split->addWidget(tabs);
    split->setStretchFactor(1, 2);

    auto* layout = new QVBoxLayout(this);
    layout->addLayout(form);
    layout->addLayout(actions);
    layout->addWidget(message_label_);
    layout->addWidget(split, 1);

    connect(run_button_, &QPushButton::clicked, this, &PlannerPanel::run);
    connect(cancel_button_, &QPushButton::clicked, this, &PlannerPanel::cancel);
    connect(save_button_, &QPushButton::clicked, this, &PlannerPanel::save_plan_with_dialog);
    connect(model_file, &QPushButton::clicked, this,
            [this] { browse(model_box_, "Model file (trident.model/1)"); });
    connect(cluster_file, &QPushButton::clicked, this,
            [this] { browse(cluster_box_, "Cluster file (trident.cluster/1)"); });
    connect(profile_file, &QPushButton::clicked, this,
            [this] { browse(profile_box_, "Device profile (trident.profile/1)"); });
    connect(cluster_box_, &QComboBox::currentTextChanged, this, &PlannerPanel::fill_cluster_size);
    connect(table_view_->selectionModel(), &QItemSelectionModel::currentRowChanged, this,
            [this](const QModelIndex& current) {
                if (current.isValid()) show_candidate(sort_model_->mapToSource(current).row());
            });
    fill_cluster_size(cluster_box_->currentText());
}

PlannerRequest PlannerPanel::request() const {
    PlannerRequest r;
    r.model = model_box_->currentText().trimmed().toStdString();
    r.cluster = cluster_box_->currentText().trimmed().toStdString();
    r.nodes = nodes_box_->value();
    r.devices_per_node = devices_per_node_box_->value();
    r.global_batch_size = global_batch_box_->value();
    r.seq_length = seq_length_box_->value();
    r.memory_budget = budget_edit_->text().trimmed().toStdString();
    r.profile = profile();
    return r;
}

std::string PlannerPanel::profile() const {
    return profile_box_->currentText().trimmed().toStdString();
}

void PlannerPanel::set_request(const PlannerRequest& r) {
    model_box_->setCurrentText(QString::fromStdString(r.model));
    cluster_box_->setCurrentText(QString::fromStdString(r.cluster)); // fills the size first
    nodes_box_->setValue(int(r.nodes));
    devices_per_node_box_->setValue(int(r.devices_per_node));
    global_batch_box_->setValue(int(r.global_batch_size));
    seq_length_box_->setValue(int(r.seq_length));
    budget_edit_->setText(QString::fromStdString(r.memory_budget));
    profile_box_->setCurrentText(QString::fromStdString(r.profile));
}

// A cluster preset's own size is the natural starting point; the user then scales it.
void PlannerPanel::fill_cluster_size(const QString& cluster) {
    try {
        const core::Json j = core::resolve_reference(cluster.trimmed().toStdString(),
                                                     core::PresetKind::cluster, "cluster");
        if (const auto n = j.find("nodes"); n != j.end() && n->is_number_integer())
            nodes_box_->setValue(n->get<int>());
        if (const auto d = j.find("devices_per_node"); d != j.end() && d->is_number_integer())
            devices_per_node_box_->setValue(d->get<int>());
    } catch (const std::exception&) {
        // Half-typed names and unreadable files are reported when Run loads them.
    }
}

void PlannerPanel::browse(QComboBox* box, const QString& title) {
    const QString path = QFileDialog::getOpenFileName(this, title, {}, "JSON (*.json);;All (*)");
    if (!path.isEmpty()) box->setCurrentText(path);
}

bool PlannerPanel::running() const {
    return watcher_.isRunning();
}

QString PlannerPanel::message() const {
    return message_label_->text();
}

void PlannerPanel::run() {
    if (running()) return;
    cancel_flag_ = std::make_shared<std::atomic<bool>>(false);
    run_button_->setEnabled(false);
    cancel_button_->setEnabled(true);
    progress_bar_->setRange(0, 0); // busy until the first report
    show_info("Searching…");
    // The worker posts progress to this panel; the destructor waits for the worker, so the
    // panel outlives every post.
    auto on_progress = [this, last = std::chrono::steady_clock::time_point{}](
                           const planner::Progress& p) mutable {
        const auto now = std::chrono::steady_clock::now();
        if (now - last < kProgressInterval) return;
        last = now;
        QMetaObject::invokeMethod(
            this,
            [this, phase = QString::fromUtf8(p.phase.data(), qsizetype(p.phase.size())),
             done = qint64(p.done), total = qint64(p.total)] { show_progress(phase, done, total); },
            Qt::QueuedConnection);
    };
    watcher_.setFuture(
        QtConcurrent::run([request = request(), flag = cancel_flag_, on_progress]() mutable {
            return run_planner_search(request, flag.get(), std::move(on_progress));
        }));
}

void PlannerPanel::cancel() {
    if (cancel_flag_) cancel_flag_->store(true);
}

void PlannerPanel::show_progress(const QString& phase, qint64 done, qint64 total) {
    if (!running() || total <= 0) return;
    // QProgressBar counts in int; permille is plenty and never overflows.
    progress_bar_->setRange(0, 1000);
    progress_bar_->setValue(int(1000 * done / total));
    progress_bar_->setFormat(phase + " %p%");
}

void PlannerPanel::finish_run() {
    const PlannerOutcome outcome = watcher_.result();
    run_button_->setEnabled(true);
    cancel_button_->setEnabled(false);
    progress_bar_->setRange(0, 1000);
    progress_bar_->setValue(outcome.error.isEmpty() ? 1000 : 0);
    progress_bar_->setFormat("%p%");
    if (!outcome.error.isEmpty()) {
        show_error(outcome.error);
        emit plan_finished(false);
        return;
    }
    const planner::PlanResult& r = outcome.result;
    job_ = outcome.job;
    budget_bytes_ = job_->memory_budget_bytes;
    table_view_->sortByColumn(-1, Qt::AscendingOrder);
    table_model_->set_candidates(r.best, budget_bytes_);
    show_info(QString("%1 layouts, %2 fit, %3 simulated in %4 s%5")
                  .arg(r.layouts)
                  .arg(r.feasible)
                  .arg(r.simulated)
                  .arg(r.seconds, 0, 'f', 2)
                  .arg(r.cancelled ? " (cancelled: the best found so far)" : ""));
    if (!r.best.empty()) table_view_->selectRow(0);
    emit plan_finished(!r.best.empty());
}

void PlannerPanel::show_candidate(int candidate_index) {
    if (!job_ || candidate_index < 0 || candidate_index >= table_model_->rowCount()) return;
    const planner::Candidate& c = table_model_->candidate(candidate_index);
    // On the GUI thread: one simulation takes milliseconds (the planner runs hundreds a
    // second), so a click answers at once without a second worker to cancel and order.
    try {
        simulator::SimulateOptions options;
        options.trace = true;
        simulator::Report report = simulator::simulate(c.job, job_->profile, options);
        const core::ParallelPlan& p = c.job.plan;
        const QString title = QString("%1 #%2: tp %3 pp %4 dp %5")
                                  .arg(QString::fromStdString(c.job.model.name))
                                  .arg(candidate_index + 1)
                                  .arg(p.tp)
                                  .arg(p.pp)
                                  .arg(p.dp);
        timeline_->set_trace(report.trace, title);
        std::vector<simulator::StageMemory> memory;
        for (const auto& stage : report.stages) memory.push_back(stage.memory);
        memory_chart_->set_stages(std::move(memory), budget_bytes_);
        shown_ = c;
        shown_report_ = std::move(report);
        save_button_->setEnabled(true);
        emit candidate_shown(candidate_index);
    } catch (const std::exception& e) {
        show_error(QString("simulating candidate %1: %2").arg(candidate_index + 1).arg(e.what()));
    }
}

void PlannerPanel::show_simulated_job(const simulator::Report& report, const QString& title) {
    const core::JobSpec& job = report.job;
    const bool model_preset = core::find_preset(core::PresetKind::model, job.model.name) != nullptr;
    const bool cluster_preset =
        core::find_preset(core::PresetKind::cluster, job.cluster.name) != nullptr;
    if (model_preset) model_box_->setCurrentText(QString::fromStdString(job.model.name));
    if (cluster_preset) cluster_box_->setCurrentText(QString::fromStdString(job.cluster.name));
    nodes_box_->setValue(int(job.cluster.nodes));
    devices_per_node_box_->setValue(int(job.cluster.devices_per_node));
    global_batch_box_->setValue(int(job.training.global_batch_size));
    seq_length_box_->setValue(int(job.training.seq_length));
    timeline_->set_trace(report.trace, title);
    std::vector<simulator::StageMemory> memory;
    for (const auto& stage : report.stages) memory.push_back(stage.memory);
    double budget = 0.0;
    try {
        budget = planner::parse_memory_budget(budget_edit_->text().trimmed().toStdString(),
                                              report.memory_capacity_bytes, "memory budget");
    } catch (const core::SpecError&) {
        budget = report.memory_capacity_bytes; // the device itself is the hard limit
    }
    memory_chart_->set_stages(std::move(memory), budget);
    shown_.reset();
    shown_report_ = report;
    save_button_->setEnabled(false);
    show_info(title + (model_preset && cluster_preset
                           ? QString(": Run searches other layouts of the same job")
                           : QString(": its model or cluster is no preset; choose files to Run")));
}

bool PlannerPanel::save_plan(const QString& path) {
    if (!shown_) {
        show_error("save plan: select a candidate first");
        return false;
    }
    try {
        core::write_file_atomically(path.toStdString(),
                                    planner::plan_file(*shown_, budget_bytes_).dump(2) + "\n",
                                    path.toStdString());
        show_info("wrote " + path);
        return true;
    } catch (const core::SpecError& e) {
        show_error(QString::fromStdString(e.field() + ": " + e.reason()));
        return false;
    }
}

void PlannerPanel::save_plan_with_dialog() {
    const QString path =
        QFileDialog::getSaveFileName(this, "Save plan", "plan.json", "Plan (*.json)");
    if (!path.isEmpty()) save_plan(path);
}

void PlannerPanel::show_error(const QString& text) {
    has_error_ = true;
    message_label_->setStyleSheet("color: #b00020;");
    message_label_->setText(text);
    emit status_message(text);
}

void PlannerPanel::show_info(const QString& text) {
    has_error_ = false;
    message_label_->setStyleSheet({});
    message_label_->setText(text);
    emit status_message(text);
}

} // namespace trident::gui
