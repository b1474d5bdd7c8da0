#include "main_window.h"

#include "compare_view.h"
#include "memory_chart.h"
#include "planner_panel.h"
#include "timeline_view.h"
#include "trident/core/atomic_file.h"
#include "trident/core/spec_error.h"
#include "trident/simulator/report.h"

#include <QApplication>
#include <QComboBox>
#include <QFileDialog>
#include <QFileInfo>
#include <QMenuBar>
#include <QMessageBox>
#include <QStatusBar>
#include <QTabWidget>
#include <sstream>

namespace trident::gui {
namespace {

QString title_of(const OpenedFile& f) {
    QString title = QFileInfo(QString::fromStdString(f.path)).fileName();
    if (!f.trace.source.empty()) title += " (" + QString::fromStdString(f.trace.source) + ")";
    return title;
}

QString error_line(const core::SpecError& e) {
    return QString::fromStdString(e.field() + ": " + e.reason());
}

} // namespace

MainWindow::MainWindow(QWidget* parent) : QMainWindow(parent) {
    setWindowTitle("Trident");
    tabs_ = new QTabWidget;
    timeline_ = new TimelineView;
    compare_ = new CompareView;
    planner_ = new PlannerPanel;
    tabs_->addTab(timeline_, "Timeline");
    tabs_->addTab(compare_, "Compare");
    tabs_->addTab(planner_, "Planner");
    setCentralWidget(tabs_);
    build_menu();
    connect(planner_, &PlannerPanel::status_message, this,
            [this](const QString& text) { statusBar()->showMessage(text); });
    connect(planner_, &PlannerPanel::candidate_shown, this, [this] { update_actions(); });
    connect(tabs_, &QTabWidget::currentChanged, this, [this] { update_actions(); });
    statusBar()->showMessage("Open a trace, plan or report (File ▸ Open), or run the Planner");
    update_actions();
}

void MainWindow::build_menu() {
    QMenu* file = menuBar()->addMenu("&File");
    file->addAction("&Open…", QKeySequence::Open, this, &MainWindow::open_with_dialog);
    file->addAction("Open second trace for &Compare…", this, &MainWindow::open_compare_with_dialog);
    file->addSeparator();
    save_trace_ =
        file->addAction("Save &trace…", this, [this] { save_with_dialog(SaveKind::trace); });
    save_report_ =
        file->addAction("Save &report…", this, [this] { save_with_dialog(SaveKind::report); });
    save_plan_ = file->addAction("Save &plan…", QKeySequence::Save, this,
                                 [this] { save_with_dialog(SaveKind::plan); });
    file->addSeparator();
    file->addAction("Export view as &PNG…", this, [this] { export_with_dialog(false); });
    file->addAction("Export view as &SVG…", this, [this] { export_with_dialog(true); });
    file->addSeparator();
    file->addAction("&Quit", QKeySequence::Quit, this, &QWidget::close);
    QMenu* help = menuBar()->addMenu("&Help");
    help->addAction("Timeline &controls", QKeySequence::HelpContents, this, [this] {
        QMessageBox::information(this, "Timeline controls", timeline_controls_text());
    });
    help->addAction("&About Trident", this, [this] {
        QMessageBox::about(this, "About Trident",
                           "Trident: plans, simulates and runs 3D-parallel transformer training.\n"
                           "Open a trace, plan or report (File ▸ Open), or search layouts in the "
                           "Planner tab. Documentation: docs/gui.md.");
    });
}

void MainWindow::set_profile(const QString& profile) {
    planner_->profile_box()->setCurrentText(profile);
}

bool MainWindow::open_file(const QString& path) {
    try {
        OpenedFile f = open_trident_file(path.toStdString(), planner_->profile());
        const QString title = title_of(f);
        timeline_->set_trace(f.trace, title);
        setWindowTitle("Trident — " + title); // in full: the timeline's corner elides it
        if (f.report) planner_->show_simulated_job(*f.report, title);
        compare_a_ = f;
        opened_ = std::move(f);
        update_compare();
        show_view(View::timeline);
        inform("opened " + path);
        update_actions();
        return true;
    } catch (const core::SpecError& e) {
        fail(error_line(e));
    } catch (const std::exception& e) {
        fail(path + ": " + e.what());
    }
    return false;
}

bool MainWindow::open_compare_file(const QString& path) {
    try {
        compare_b_ = open_trident_file(path.toStdString(), planner_->profile());
        update_compare();
        show_view(View::compare);
        inform("comparing with " + path);
        return true;
    } catch (const core::SpecError& e) {
        fail(error_line(e));
    } catch (const std::exception& e) {
        fail(path + ": " + e.what());
    }
    return false;
}

void MainWindow::update_compare() {
    if (compare_a_ && compare_b_)
        compare_->set_traces(compare_a_->trace, title_of(*compare_a_), compare_b_->trace,
                             title_of(*compare_b_));
}

const core::Trace* MainWindow::current_trace() const {
    if (current_view() == View::planner && planner_->shown_report())
        return &planner_->shown_report()->trace;
    return opened_ ? &opened_->trace : nullptr;
}

const simulator::Report* MainWindow::current_report() const {
    if (current_view() == View::planner && planner_->shown_report())
        return &*planner_->shown_report();
    return opened_ && opened_->report ? &*opened_->report : nullptr;
}

bool MainWindow::save_file(const QString& path, SaveKind kind) {
    const std::string file = path.toStdString();
    try {
        switch (kind) {
        case SaveKind::trace: {
            const core::Trace* trace = current_trace();
            if (!trace) throw core::SpecError("save trace", "no trace is shown");
            std::ostringstream text;
            core::write_chrome_trace(*trace, text);
            core::write_file_atomically(file, text.str(), file);
            break;
        }
        case SaveKind::report: {
            const simulator::Report* report = current_report();
            if (!report)
                throw core::SpecError("save report",
                                      "no simulation is shown (open a plan or run the planner)");
            core::write_file_atomically(file, simulator::report_json(*report).dump(2) + "\n", file);
            break;
        }
        case SaveKind::plan:
            if (current_view() == View::planner && planner_->shown_candidate()) {
                if (!planner_->save_plan(path))
                    throw core::SpecError(file, planner_->message().toStdString());
            } else if (const simulator::Report* report = current_report()) {
                core::write_file_atomically(file, core::to_json(report->job).dump(2) + "\n", file);
            } else {
                throw core::SpecError(
                    "save plan", "no plan is shown (select a planner candidate or open a plan)");
            }
            break;
        }
        inform("saved " + path);
        return true;
    } catch (const core::SpecError& e) {
        fail(error_line(e));
    }
    return false;
}

bool MainWindow::export_png(const QString& path) {
    try {
        if (current_view() == View::timeline) {
            timeline_->render_png(path);
        } else if (current_view() == View::compare) {
            compare_->render_png(path);
        } else {
            QWidget* view = tabs_->currentWidget();
            if (!view->grab().save(path, "PNG"))
                throw core::SpecError(path.toStdString(), "cannot write the PNG file");
        }
        inform("exported " + path);
        return true;
    } catch (const core::SpecError& e) {
        fail(error_line(e));
    }
    return false;
}

bool MainWindow::export_svg(const QString& path) {
    try {
        switch (current_view()) {
        case View::timeline:
            timeline_->render_svg(path);
            break;
        case View::compare:
            compare_->render_svg(path);
            break;
        case View::planner: {
            // The table is text; the picture worth a vector file is the memory chart.
            const MemoryChart* chart = planner_->memory_chart();
            if (chart->bar_count() == 0)
                throw core::SpecError("export SVG", "select a planner candidate first");
            const QSize size =
                chart->size().isValid() && chart->width() > 1 ? chart->size() : chart->sizeHint();
            core::write_file_atomically(path.toStdString(), chart->render_svg(size).toStdString(),
                                        path.toStdString());
            break;
        }
        }
        inform("exported " + path);
        return true;
    } catch (const core::SpecError& e) {
        fail(error_line(e));
    }
    return false;
}

void MainWindow::show_view(View view) {
    tabs_->setCurrentIndex(int(view));
}

MainWindow::View MainWindow::current_view() const {
    return View(tabs_->currentIndex());
}

void MainWindow::fail(const QString& text) {
    last_error_ = text;
    statusBar()->showMessage(text);
}

void MainWindow::inform(const QString& text) {
    last_error_.clear();
    statusBar()->showMessage(text);
}

void MainWindow::update_actions() {
    save_trace_->setEnabled(current_trace() != nullptr);
    save_report_->setEnabled(current_report() != nullptr);
    save_plan_->setEnabled(current_report() != nullptr || planner_->shown_candidate());
}

void MainWindow::open_with_dialog() {
    const QString path = QFileDialog::getOpenFileName(this, "Open trace, plan or report", {},
                                                      "Trident JSON (*.json);;All (*)");
    if (!path.isEmpty() && !open_file(path)) QMessageBox::warning(this, "Open", last_error_);
}

void MainWindow::open_compare_with_dialog() {
    const QString path = QFileDialog::getOpenFileName(this, "Open a trace to compare", {},
                                                      "Trident JSON (*.json);;All (*)");
    if (!path.isEmpty() && !open_compare_file(path))
        QMessageBox::warning(this, "Compare", last_error_);
}

void MainWindow::save_with_dialog(SaveKind kind) {
    static const char* const kNames[] = {"trace.json", "report.json", "plan.json"};
    const QString path =
        QFileDialog::getSaveFileName(this, "Save", kNames[int(kind)], "JSON (*.json)");
    if (!path.isEmpty() && !save_file(path, kind)) QMessageBox::warning(this, "Save", last_error_);
}

void MainWindow::export_with_dialog(bool svg) {
    const QString path = QFileDialog::getSaveFileName(this, svg ? "Export SVG" : "Export PNG",
                                                      svg ? "view.svg" : "view.png",
                                                      svg ? "SVG (*.svg)" : "PNG (*.png)");
    if (path.isEmpty()) return;
    if (!(svg ? export_svg(path) : export_png(path)))
        QMessageBox::warning(this, "Export", last_error_);
}

} // namespace trident::gui
