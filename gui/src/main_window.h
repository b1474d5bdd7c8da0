#pragma once
// MainWindow: the Timeline, Compare and Planner views in tabs, and the File menu — open a
// trace, plan or report (recognised by content), open a second trace to compare, save the
// current trace, report or plan, and export the current view as PNG or SVG. Every public
// operation reports failure as one line (status bar, last_error()) and returns false; only
// the menu's interactive path adds a dialog.
#include "opened_file.h"

#include <QMainWindow>
#include <optional>

class QAction;
class QTabWidget;

namespace trident::gui {

class CompareView;
class PlannerPanel;
class TimelineView;

class MainWindow : public QMainWindow {
    Q_OBJECT
public:
    enum class View { timeline, compare, planner };
    enum class SaveKind { trace, report, plan };

    explicit MainWindow(QWidget* parent = nullptr);

    // Trace → Timeline tab; plan → simulated, shown on the Timeline tab and loaded into the
    // Planner; report → its job's timeline. The first trace opened is also Compare's left side.
    bool open_file(const QString& path);
    // The device profile (trident-gui --profile) plans and reports are simulated on, and the
    // Planner tab's; empty: each job's own (core::find_profile's order).
    void set_profile(const QString& profile);
    // The right side of Compare (the left is the last file opened); switches to Compare.
    bool open_compare_file(const QString& path);
    bool save_file(const QString& path, SaveKind kind);
    // The current view: Timeline and Compare through their own renderers; the Planner as the
    // widget looks (PNG) or its memory chart (SVG).
    bool export_png(const QString& path);
    bool export_svg(const QString& path);

    void show_view(View view);
    View current_view() const;
    QString last_error() const { return last_error_; }

    TimelineView* timeline() const { return timeline_; }
    CompareView* compare() const { return compare_; }
    PlannerPanel* planner() const { return planner_; }
    QTabWidget* tabs() const { return tabs_; }

private:
    void build_menu();
    void fail(const QString& text);
    void inform(const QString& text);
    void update_compare();
    void update_actions();
    // The trace/report Save writes: the planner's shown candidate on the Planner tab, else the
    // file opened last.
    const core::Trace* current_trace() const;
    const simulator::Report* current_report() const;
    void open_with_dialog();
    void open_compare_with_dialog();
    void save_with_dialog(SaveKind kind);
    void export_with_dialog(bool svg);

    QTabWidget* tabs_ = nullptr;
    TimelineView* timeline_ = nullptr;
    CompareView* compare_ = nullptr;
    PlannerPanel* planner_ = nullptr;
    QAction* save_trace_ = nullptr;
    QAction* save_report_ = nullptr;
    QAction* save_plan_ = nullptr;

    std::optional<OpenedFile> opened_; // shown on the Timeline tab
    std::optional<OpenedFile> compare_a_;
    std::optional<OpenedFile> compare_b_;
    QString last_error_;
};

} // namespace trident::gui
