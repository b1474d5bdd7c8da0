#include "memory_chart_picture.h"

#include "trident/core/units.h"

#include <algorithm>
#include <cmath>

namespace trident::gui {
namespace {

constexpr double kLeftMargin = 64.0; // room for "100 GiB" tick labels
constexpr double kRightMargin = 16.0;
constexpr double kBottomMargin = 28.0;
const QColor kBudgetColor(200, 30, 30);

} // namespace

QColor memory_part_color(MemoryPart part) {
    switch (part) {
    case MemoryPart::weights:
        return {66, 114, 196};
    case MemoryPart::gradients:
        return {237, 125, 49};
    case MemoryPart::optimizer:
        return {112, 173, 71};
    case MemoryPart::activations:
        return {165, 90, 190};
    case MemoryPart::buffers:
        return {150, 150, 150};
    case MemoryPart::reserve:
        return {210, 210, 210};
    }
    return Qt::black;
}

double memory_part_bytes(const simulator::StageMemory& m, MemoryPart part) {
    switch (part) {
    case MemoryPart::weights:
        return m.weights_bytes;
    case MemoryPart::gradients:
        return m.gradients_bytes;
    case MemoryPart::optimizer:
        return m.optimizer_bytes;
    case MemoryPart::activations: // stored, and the backward's working set on top
        return m.activations_bytes + m.backward_working_bytes;
    case MemoryPart::buffers: // with what ZeRO-2/3 hold gathered
        return m.buffers_bytes + m.gathered_bytes;
    case MemoryPart::reserve:
        return m.allocator_reserve_bytes + m.runtime_bytes;
    }
    return 0.0;
}

MemoryChartPicture layout_memory_chart(const std::vector<simulator::StageMemory>& stages,
                                       double budget_bytes, QSizeF size) {
    MemoryChartPicture p;
    p.size = size;
    p.bar_count = int(stages.size());
    p.boxes.push_back({QRectF(QPointF(0, 0), size), Qt::white});

    // Legend along the top, wrapped to the width so a narrow chart still names every part.
    constexpr double kEntryWidth = 92.0, kRowHeight = 16.0;
    const double legend_right = std::max(size.width() - kRightMargin, kLeftMargin + kEntryWidth);
    double x = kLeftMargin, y = 8.0;
    const auto place_entry = [&] {
        if (x + kEntryWidth > legend_right && x > kLeftMargin) {
            x = kLeftMargin;
            y += kRowHeight;
        }
    };
    for (int i = 0; i < kMemoryPartCount; ++i) {
        place_entry();
        p.boxes.push_back({QRectF(x, y, 10, 10), memory_part_color(MemoryPart(i))});
        p.texts.push_back(
            {QPointF(x + 14, y + 9),
             QString::fromUtf8(kMemoryPartNames[i].data(), int(kMemoryPartNames[i].size())),
             kChartTextColor});
        x += kEntryWidth;
    }
    if (budget_bytes > 0) {
        place_entry();
        p.lines.push_back({QLineF(x, y + 5, x + 20, y + 5), kBudgetColor, true});
        p.texts.push_back({QPointF(x + 24, y + 9), "budget", kChartTextColor});
    }
    const double top_margin = y + kRowHeight + 12.0;

    const QRectF plot(kLeftMargin, top_margin,
                      std::max(1.0, size.width() - kLeftMargin - kRightMargin),
                      std::max(1.0, size.height() - top_margin - kBottomMargin));
    double max_bytes = budget_bytes;
    for (const auto& s : stages) max_bytes = std::max(max_bytes, s.total_bytes());
    if (max_bytes <= 0) max_bytes = core::kGiB;
    // The axis in the unit that fits its top: GiB for GPUs, MiB or KiB for tiny CPU models.
    const core::Unit unit = core::byte_unit(max_bytes);
    const double step =
        tick_step(max_bytes * 1.05 / unit.scale, std::min(5, int(plot.height() / 18.0)));
    p.axis_max_bytes = std::ceil(max_bytes * 1.05 / unit.scale / step) * step * unit.scale;
    const auto y_of = [&](double bytes) {
        return plot.bottom() - plot.height() * bytes / p.axis_max_bytes;
    };

    // Axes and ticks.
    p.lines.push_back({QLineF(plot.bottomLeft(), plot.topLeft()), kChartAxisColor});
    p.lines.push_back({QLineF(plot.bottomLeft(), plot.bottomRight()), kChartAxisColor});
    for (double tick = 0; tick * unit.scale <= p.axis_max_bytes * 1.0001; tick += step) {
        const double y = y_of(tick * unit.scale);
        p.lines.push_back({QLineF(plot.left() - 4, y, plot.left(), y), kChartAxisColor});
        p.texts.push_back(
            {QPointF(4, y + 4), QString::number(tick, 'g', 4) + " " + unit.name, kChartTextColor});
    }

    // One stacked bar per stage, bottom up in MemoryPart order.
    const double slot = plot.width() / std::max<std::size_t>(stages.size(), 1);
    const double bar_width = std::min(slot * 0.7, 80.0);
    const std::size_t label_every = std::size_t(std::ceil(24.0 / std::max(slot, 1.0)));
    for (std::size_t s = 0; s < stages.size(); ++s) {
        const double left = plot.left() + slot * double(s) + (slot - bar_width) / 2;
        p.bars.push_back(QRectF(left, plot.top(), bar_width, plot.height()));
        double below = 0.0;
        for (int i = 0; i < kMemoryPartCount; ++i) {
            const double bytes = memory_part_bytes(stages[s], MemoryPart(i));
            if (bytes <= 0) continue;
            const double top = y_of(below + bytes);
            p.boxes.push_back({QRectF(left, top, bar_width, y_of(below) - top),
                               memory_part_color(MemoryPart(i))});
            below += bytes;
        }
        // Labels only where they fit (about 6 px a character): deep pipelines get numbers,
        // and every label_every-th of them, rather than text printed over text.
        if (s % label_every == 0)
            p.texts.push_back({QPointF(left + bar_width / 2, plot.bottom() + 16),
                               (slot >= 52 ? "stage " : "") + QString::number(s), kChartTextColor,
                               true});
        if (slot >= 34)
            p.texts.push_back({QPointF(left + bar_width / 2, y_of(below) - 4),
                               QString::number(below / unit.scale, 'f', 1), kChartTextColor, true});
    }

    if (budget_bytes > 0) {
        p.budget_y = y_of(budget_bytes);
        p.lines.push_back(
            {QLineF(plot.left(), p.budget_y, plot.right(), p.budget_y), kBudgetColor, true});
    }
    return p;
}

} // namespace trident::gui
