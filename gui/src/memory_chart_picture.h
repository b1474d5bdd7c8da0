#pragma once
// The memory chart as a display list (chart_picture.h): per pipeline stage a stacked bar of
// weights, gradients, optimizer state, activations and buffers, a dashed budget line, axis
// ticks and a legend.
#include "chart_picture.h"
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

// `reserve`: the allocator's reserve and what lives outside it (CUDA context, NCCL, DeepEP):
// what the device holds beyond the allocated tensors (simulator/device_memory.h).
enum class MemoryPart { weights, gradients, optimizer, activations, buffers, reserve };
inline constexpr int kMemoryPartCount = 6;
inline constexpr std::array<std::string_view, kMemoryPartCount> kMemoryPartNames = {
    "weights", "gradients", "optimizer", "activations", "buffers", "reserve & runtime"};

QColor memory_part_color(MemoryPart part);
double memory_part_bytes(const simulator::StageMemory& memory, MemoryPart part);

// boxes: background, then bar segments (stage by stage, bottom up); lines: axes, ticks, the
// budget.
struct MemoryChartPicture : ChartPicture {
    std::vector<QRectF> bars; // each stage's whole column (hover: which stage is under the mouse)
    int bar_count = 0;
    double axis_max_bytes = 0.0;
    double budget_y = 0.0; // where the budget line is drawn (pixels from the top)
};

// `budget_bytes` 0: no budget line.
MemoryChartPicture layout_memory_chart(const std::vector<simulator::StageMemory>& stages,
                                       double budget_bytes, QSizeF size);

} // namespace trident::gui
