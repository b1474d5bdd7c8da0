#pragma once
// The two renderers of a TimelineDisplayList: QPainter (the widget, PNG files) and hand-written
// SVG text (export without QtSvg). Both draw the same primitives in the same order.
#include "timeline_display_list.h"

#include <QImage>
#include <QPainter>
#include <QString>
#include <string>
#include <vector>

namespace trident::gui {

void paint_display_list(QPainter& painter, const TimelineDisplayList& list);
QImage render_display_list(const TimelineDisplayList& list);

// A self-contained SVG 1.1 document: one <rect> per idle band, block and merged block.
std::string display_list_svg(const TimelineDisplayList& list);
// Several lists stacked top to bottom in one document (the compare view's two timelines).
std::string stacked_svg(const std::vector<TimelineDisplayList>& lists);

// Build the list for `viewport` and render it. Throws SpecError(path, ...) when the file cannot
// be written.
QImage render_timeline(const TimelineModel& model, const TimelineViewport& viewport,
                       const DisplayListOptions& options = {});
void save_timeline_png(const TimelineModel& model, const TimelineViewport& viewport,
                       const QString& path, const DisplayListOptions& options = {});
void save_timeline_svg(const TimelineModel& model, const TimelineViewport& viewport,
                       const QString& path, const DisplayListOptions& options = {});

void save_image_png(const QImage& image, const QString& path);
void save_text_file(const std::string& text, const QString& path);

} // namespace trident::gui
