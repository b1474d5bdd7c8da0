#pragma once
// CompareView: two timelines on one time axis (simulated vs measured, plan A vs plan B). Zoom,
// pan and the stage grouping are linked, both views span the union of the two steps, and a
// table below lists per lane the busy time, bubble fraction and end time in A and B and their
// difference (B - A). The lanes are not linked: each timeline scrolls its own lanes, since A
// and B may hold different lanes (every rank against one per stage).
#include "compare_lanes.h"
#include "timeline_view.h"

#include <QString>
#include <QWidget>
#include <memory>
#include <vector>

class QTableWidget;

namespace trident::gui {

class CompareView : public QWidget {
    Q_OBJECT

public:
    explicit CompareView(QWidget* parent = nullptr);

    void set_traces(const core::Trace& a, const QString& a_title, const core::Trace& b,
                    const QString& b_title);
    void set_models(std::shared_ptr<const TimelineModel> a, const QString& a_title,
                    std::shared_ptr<const TimelineModel> b, const QString& b_title);

    TimelineView* view_a() const { return view_a_; }
    TimelineView* view_b() const { return view_b_; }
    QTableWidget* table() const { return table_; }
    const std::vector<LaneDifference>& differences() const { return differences_; }

    // Both timelines (each its current vertical window of lanes) at the views' current sizes
    // (or `size` for each), stacked: PNG via QPainter, SVG written by hand. Throw SpecError.
    void render_png(const QString& path, QSize size = {}) const;
    void render_svg(const QString& path, QSize size = {}) const;

private:
    void fill_table();
    void link(TimelineView* from, TimelineView* to);

    TimelineView* view_a_ = nullptr;
    TimelineView* view_b_ = nullptr;
    QTableWidget* table_ = nullptr;
    std::vector<LaneDifference> differences_;
    bool syncing_ = false; // set while one view copies the other's range, to stop ping-pong
};

} // namespace trident::gui
