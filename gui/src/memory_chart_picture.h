#pragma once
// The memory chart as a display list: per pipeline stage a stacked bar of weights, gradients,
// optimizer state, activations and buffers, a dashed budget line, axis ticks and a legend.
// Laid out once, then painted on screen, into a PNG or written as SVG text, so the three
// pictures cannot disagree.
#include "trident/simulator/memory.h"

#include <QColor>
#include <QLineF>
#include <QRectF>
#include <QSizeF>
#include <QString>
#include <array>
#include <string_view>
#include <vector>

class QPainter;

namespace trident::gui {

enum class MemoryPart { weights, gradients, optimizer, activations, buffers };
inline constexpr int kMemoryPartCount = 5;
inline constexpr std::array<std::string_view, kMemoryPartCount> kMemoryPartNames = {
    "weights", "gradients", "optimizer", "activations", "buffers"};

QColor memory_part_color(MemoryPart part);
double memory_part_bytes(const simulator::StageMemory& memory, MemoryPart part);

struct ChartBox {
    QRectF rect;
    QColor fill;
};
struct ChartLine {
    QLineF line;
    QColor color;
    bool dashed = false;
};
struct ChartText {
    QPointF anchor; // baseline start, or baseline centre when centred
    QString text;
    QColor color;
    bool centred = false;
};

struct MemoryChartPicture {
    QSizeF size;
    std::vector<ChartBox> boxes;  // background, then bar segments (stage by stage, bottom up)
    std::vector<ChartLine> lines; // axes, ticks, the budget
    std::vector<ChartText> texts;
    std::vector<QRectF> bars; // each stage's whole column (hover: which stage is under the mouse)
    int bar_count = 0;
    double axis_max_bytes = 0.0;
    double budget_y = 0.0; // where the budget line is drawn (pixels from the top)
};

// `budget_bytes` 0: no budget line.
MemoryChartPicture layout_memory_chart(const std::vector<simulator::StageMemory>& stages,
                                       double budget_bytes, QSizeF size);

void paint_memory_chart(const MemoryChartPicture& picture, QPainter& painter);
QString memory_chart_svg(const MemoryChartPicture& picture);

} // namespace trident::gui
