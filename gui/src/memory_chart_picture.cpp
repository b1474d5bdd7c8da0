#include "memory_chart_picture.h"

#include "trident/core/units.h"

#include <QPainter>
#include <algorithm>
#include <cmath>

namespace trident::gui {
namespace {

constexpr double kLeftMargin = 64.0; // room for "100 GiB" tick labels
constexpr double kRightMargin = 16.0;
constexpr double kBottomMargin = 28.0;
const QColor kTextColor(40, 40, 40);
const QColor kAxisColor(120, 120, 120);
const QColor kBudgetColor(200, 30, 30);

// 1, 2 or 5 times a power of ten of the axis unit, so ticks read as round numbers; at most
// `ticks` of them so their labels never overlap.
double tick_step(double max_units, int ticks) {
    const double raw = max_units / std::max(ticks, 1);
    const double power = std::pow(10.0, std::floor(std::log10(std::max(raw, 1e-6))));
    for (const double m : {1.0, 2.0, 5.0, 10.0})
        if (raw <= m * power) return m * power;
    return 10.0 * power;
}

QString escaped(const QString& text) {
    return text.toHtmlEscaped();
}

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
    case MemoryPart::buffers:
        return m.buffers_bytes;
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
             kTextColor});
        x += kEntryWidth;
    }
    if (budget_bytes > 0) {
        place_entry();
        p.lines.push_back({QLineF(x, y + 5, x + 20, y + 5), kBudgetColor, true});
        p.texts.push_back({QPointF(x + 24, y + 9), "budget", kTextColor});
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
    p.lines.push_back({QLineF(plot.bottomLeft(), plot.topLeft()), kAxisColor});
    p.lines.push_back({QLineF(plot.bottomLeft(), plot.bottomRight()), kAxisColor});
    for (double tick = 0; tick * unit.scale <= p.axis_max_bytes * 1.0001; tick += step) {
        const double y = y_of(tick * unit.scale);
        p.lines.push_back({QLineF(plot.left() - 4, y, plot.left(), y), kAxisColor});
        p.texts.push_back(
            {QPointF(4, y + 4), QString::number(tick, 'g', 4) + " " + unit.name, kTextColor});
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
                               (slot >= 52 ? "stage " : "") + QString::number(s), kTextColor,
                               true});
        if (slot >= 34)
            p.texts.push_back({QPointF(left + bar_width / 2, y_of(below) - 4),
                               QString::number(below / unit.scale, 'f', 1), kTextColor, true});
    }

    if (budget_bytes > 0) {
        p.budget_y = y_of(budget_bytes);
        p.lines.push_back(
            {QLineF(plot.left(), p.budget_y, plot.right(), p.budget_y), kBudgetColor, true});
    }
    return p;
}

void paint_memory_chart(const MemoryChartPicture& picture, QPainter& painter) {
    painter.save();
    painter.setRenderHint(QPainter::Antialiasing, false);
    for (const ChartBox& b : picture.boxes) painter.fillRect(b.rect, b.fill);
    for (const ChartLine& l : picture.lines) {
        QPen pen(l.color, l.dashed ? 2.0 : 1.0);
        if (l.dashed) pen.setStyle(Qt::DashLine);
        painter.setPen(pen);
        painter.drawLine(l.line);
    }
    const QFontMetricsF metrics(painter.font());
    for (const ChartText& t : picture.texts) {
        painter.setPen(t.color);
        const double shift = t.centred ? metrics.horizontalAdvance(t.text) / 2 : 0.0;
        painter.drawText(QPointF(t.anchor.x() - shift, t.anchor.y()), t.text);
    }
    painter.restore();
}

QString memory_chart_svg(const MemoryChartPicture& picture) {
    QString svg;
    const auto num = [](double v) { return QString::number(v, 'f', 1); };
    svg += QString("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%1\" height=\"%2\" "
                   "viewBox=\"0 0 %1 %2\" font-family=\"DejaVu Sans, sans-serif\" "
                   "font-size=\"11\">\n")
               .arg(num(picture.size.width()), num(picture.size.height()));
    for (const ChartBox& b : picture.boxes)
        svg += QString("<rect x=\"%1\" y=\"%2\" width=\"%3\" height=\"%4\" fill=\"%5\"/>\n")
                   .arg(num(b.rect.x()), num(b.rect.y()), num(b.rect.width()), num(b.rect.height()),
                        b.fill.name());
    for (const ChartLine& l : picture.lines)
        svg += QString("<line x1=\"%1\" y1=\"%2\" x2=\"%3\" y2=\"%4\" stroke=\"%5\" "
                       "stroke-width=\"%6\"%7/>\n")
                   .arg(num(l.line.x1()), num(l.line.y1()), num(l.line.x2()), num(l.line.y2()),
                        l.color.name(), l.dashed ? "2" : "1",
                        l.dashed ? " stroke-dasharray=\"6 4\"" : "");
    for (const ChartText& t : picture.texts)
        svg += QString("<text x=\"%1\" y=\"%2\" fill=\"%3\"%4>%5</text>\n")
                   .arg(num(t.anchor.x()), num(t.anchor.y()), t.color.name(),
                        t.centred ? " text-anchor=\"middle\"" : "", escaped(t.text));
    svg += "</svg>\n";
    return svg;
}

} // namespace trident::gui
