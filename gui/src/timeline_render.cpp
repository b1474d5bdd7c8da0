#include "timeline_render.h"

#include "trident/core/spec_error.h"

#include <QFile>
#include <QFont>
#include <QSaveFile>
#include <cstdio>

namespace trident::gui {
namespace {

std::string svg_number(double value) {
    char buffer[32];
    std::snprintf(buffer, sizeof buffer, "%.2f", value);
    std::string text(buffer);
    // "12.50" -> "12.5", "3.00" -> "3": shorter files, same picture.
    while (!text.empty() && text.back() == '0') text.pop_back();
    if (!text.empty() && text.back() == '.') text.pop_back();
    return text == "-0" ? "0" : text;
}

std::string svg_color(const QColor& color) {
    return color.name(QColor::HexRgb).toStdString();
}

std::string svg_escape(const QString& text) {
    std::string escaped;
    for (char c : text.toStdString()) {
        switch (c) {
        case '&':
            escaped += "&amp;";
            break;
        case '<':
            escaped += "&lt;";
            break;
        case '>':
            escaped += "&gt;";
            break;
        case '"':
            escaped += "&quot;";
            break;
        default:
            escaped += c;
        }
    }
    return escaped;
}

} // namespace

void paint_display_list(QPainter& painter, const TimelineDisplayList& list) {
    painter.save();
    // Rectangles on whole pixels, unsmoothed: a block's pixels are exactly its kind's colour.
    painter.setRenderHint(QPainter::Antialiasing, false);
    painter.fillRect(QRect(QPoint(0, 0), list.size), list.background);
    for (const RectPrimitive& rect : list.rects) {
        if (rect.filled) {
            painter.fillRect(rect.rect, rect.color);
        } else {
            painter.setPen(QPen(rect.color, 2.0));
            painter.setBrush(Qt::NoBrush);
            painter.drawRect(rect.rect.adjusted(1.0, 1.0, -1.0, -1.0));
        }
    }
    for (const LinePrimitive& line : list.lines) {
        painter.setPen(QPen(line.color, 1.0));
        painter.drawLine(line.from, line.to);
    }
    painter.setRenderHint(QPainter::TextAntialiasing, true);
    for (const TextPrimitive& text : list.texts) {
        painter.setFont(primitive_font(text.pixel_size, text.bold));
        painter.setPen(text.color);
        const int flags = Qt::AlignVCenter | Qt::TextSingleLine |
                          (text.centered ? Qt::AlignHCenter : Qt::AlignLeft);
        painter.drawText(text.box, flags, text.text);
    }
    painter.restore();
}

QImage render_display_list(const TimelineDisplayList& list) {
    QImage image(list.size, QImage::Format_RGB32);
    QPainter painter(&image);
    paint_display_list(painter, list);
    return image;
}

namespace {

std::string svg_open(QSize size, int y_px, bool outermost) {
    const std::string width = std::to_string(size.width());
    const std::string height = std::to_string(size.height());
    std::string svg = "<svg";
    if (outermost) svg += " xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\"";
    if (!outermost) svg += " x=\"0\" y=\"" + std::to_string(y_px) + "\"";
    svg += " width=\"" + width + "\" height=\"" + height + "\" viewBox=\"0 0 " + width + " " +
           height + "\" font-family=\"DejaVu Sans, sans-serif\">\n";
    return svg;
}

void append_svg_body(const TimelineDisplayList& list, std::string& svg);

} // namespace

std::string display_list_svg(const TimelineDisplayList& list) {
    std::string svg;
    svg.reserve(128 + 96 * list.primitive_count());
    svg += "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
    svg += svg_open(list.size, 0, true);
    append_svg_body(list, svg);
    svg += "</svg>\n";
    return svg;
}

std::string stacked_svg(const std::vector<TimelineDisplayList>& lists) {
    QSize size(0, 0);
    for (const TimelineDisplayList& list : lists)
        size = QSize(std::max(size.width(), list.size.width()), size.height() + list.size.height());
    std::string svg = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n" + svg_open(size, 0, true);
    int y_px = 0;
    for (const TimelineDisplayList& list : lists) {
        svg += svg_open(list.size, y_px, false);
        append_svg_body(list, svg);
        svg += "</svg>\n";
        y_px += list.size.height();
    }
    svg += "</svg>\n";
    return svg;
}

namespace {

void append_svg_body(const TimelineDisplayList& list, std::string& svg) {
    svg += "<rect class=\"background\" x=\"0\" y=\"0\" width=\"" +
           std::to_string(list.size.width()) + "\" height=\"" + std::to_string(list.size.height()) +
           "\" fill=\"" + svg_color(list.background) + "\"/>\n";
    for (const RectPrimitive& rect : list.rects) {
        const char* role = rect.role == RectRole::idle           ? "idle"
                           : rect.role == RectRole::block        ? "block"
                           : rect.role == RectRole::merged_block ? "merged"
                           : rect.role == RectRole::legend       ? "legend"
                                                                 : "selection";
        svg += std::string("<rect class=\"") + role + "\" x=\"" + svg_number(rect.rect.x()) +
               "\" y=\"" + svg_number(rect.rect.y()) + "\" width=\"" +
               svg_number(rect.rect.width()) + "\" height=\"" + svg_number(rect.rect.height()) +
               "\" ";
        if (rect.filled) {
            svg += "fill=\"" + svg_color(rect.color) + "\"/>\n";
        } else {
            svg += "fill=\"none\" stroke=\"" + svg_color(rect.color) + "\" stroke-width=\"2\"/>\n";
        }
    }
    for (const LinePrimitive& line : list.lines) {
        svg += "<line x1=\"" + svg_number(line.from.x()) + "\" y1=\"" + svg_number(line.from.y()) +
               "\" x2=\"" + svg_number(line.to.x()) + "\" y2=\"" + svg_number(line.to.y()) +
               "\" stroke=\"" + svg_color(line.color) + "\"/>\n";
    }
    for (const TextPrimitive& text : list.texts) {
        const double x_px = text.centered ? text.box.center().x() : text.box.left();
        svg += "<text x=\"" + svg_number(x_px) + "\" y=\"" + svg_number(text.box.center().y()) +
               "\" font-size=\"" + svg_number(text.pixel_size) +
               "\" dominant-baseline=\"central\" fill=\"" + svg_color(text.color) + "\"";
        if (text.centered) svg += " text-anchor=\"middle\"";
        if (text.bold) svg += " font-weight=\"bold\"";
        svg += ">" + svg_escape(text.text) + "</text>\n";
    }
}

} // namespace

QImage render_timeline(const TimelineModel& model, const TimelineViewport& viewport,
                       const DisplayListOptions& options) {
    return render_display_list(
        build_display_list(model, layout_timeline(model, viewport), options));
}

void save_image_png(const QImage& image, const QString& path) {
    if (!image.save(path, "PNG"))
        throw core::SpecError(path.toStdString(), "cannot write the PNG file");
}

void save_text_file(const std::string& text, const QString& path) {
    // QSaveFile: the file appears whole or not at all.
    QSaveFile file(path);
    if (!file.open(QIODevice::WriteOnly) ||
        file.write(text.data(), static_cast<qint64>(text.size())) !=
            static_cast<qint64>(text.size()) ||
        !file.commit())
        throw core::SpecError(path.toStdString(), "cannot write the file");
}

void save_timeline_png(const TimelineModel& model, const TimelineViewport& viewport,
                       const QString& path, const DisplayListOptions& options) {
    save_image_png(render_timeline(model, viewport, options), path);
}

void save_timeline_svg(const TimelineModel& model, const TimelineViewport& viewport,
                       const QString& path, const DisplayListOptions& options) {
    save_text_file(
        display_list_svg(build_display_list(model, layout_timeline(model, viewport), options)),
        path);
}

} // namespace trident::gui
