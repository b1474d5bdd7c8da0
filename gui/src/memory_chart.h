#pragma once
// MemoryChart: per pipeline stage, what one rank's memory holds (weights, gradients,
// optimizer state, activations, buffers) as a stacked bar against the memory budget.
// Drawn with QPainter from a display list (memory_chart_picture.h), which SVG export reuses.
#include "memory_chart_picture.h"

#include <QImage>
#include <QWidget>
#include <vector>

namespace trident::gui {

class MemoryChart : public QWidget {
    Q_OBJECT
public:
    explicit MemoryChart(QWidget* parent = nullptr);

    void set_stages(std::vector<simulator::StageMemory> stages, double budget_bytes);
    void clear();

    const std::vector<simulator::StageMemory>& stages() const { return stages_; }
    int bar_count() const { return int(stages_.size()); }
    double budget_bytes() const { return budget_bytes_; }

    MemoryChartPicture picture(QSizeF size) const;
    QImage render_image(QSize size) const;
    QString render_svg(QSize size) const;

    QSize sizeHint() const override { return {480, 260}; }

    // "stage 2: 31.8 GiB — weights 4.1, gradients 8.2, …" for the bar at `point`; empty elsewhere.
    QString describe_at(QPointF point) const;

protected:
    void paintEvent(QPaintEvent* event) override;
    bool event(QEvent* event) override;

private:
    std::vector<simulator::StageMemory> stages_;
    double budget_bytes_ = 0.0;
};

} // namespace trident::gui
