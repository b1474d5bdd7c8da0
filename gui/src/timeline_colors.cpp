#include "timeline_colors.h"

namespace trident::gui {

BlockCategory block_category(core::EventKind kind) {
    switch (kind) {
    case core::EventKind::forward:
        return BlockCategory::forward;
    case core::EventKind::backward_input:
        return BlockCategory::backward_input;
    case core::EventKind::backward_weight:
        return BlockCategory::backward_weight;
    case core::EventKind::recompute:
        return BlockCategory::recompute;
    case core::EventKind::optimizer:
        return BlockCategory::optimizer;
    case core::EventKind::send_activation:
    case core::EventKind::recv_activation:
    case core::EventKind::send_gradient:
    case core::EventKind::recv_gradient:
    case core::EventKind::gradient_reduce:
    case core::EventKind::parameter_gather:
        return BlockCategory::communication;
    }
    return BlockCategory::communication;
}

QColor category_color(BlockCategory category) {
    // Distinct hues that stay apart for the common colour-vision deficiencies (Okabe-Ito based),
    // and none of them grey, which is kept for idle time.
    switch (category) {
    case BlockCategory::forward:
        return QColor(0x00, 0x72, 0xB2); // blue
    case BlockCategory::backward_input:
        return QColor(0xE6, 0x9F, 0x00); // orange
    case BlockCategory::backward_weight:
        return QColor(0xD5, 0x5E, 0x00); // vermilion
    case BlockCategory::recompute:
        return QColor(0xCC, 0x79, 0xA7); // purple-pink
    case BlockCategory::communication:
        return QColor(0x00, 0x9E, 0x73); // green
    case BlockCategory::optimizer:
        return QColor(0x56, 0x3D, 0x7C); // dark violet
    }
    return Qt::black;
}

QColor kind_color(core::EventKind kind) {
    return category_color(block_category(kind));
}

QColor event_color(const core::TraceEvent& event) {
    const QColor base = kind_color(event.kind);
    if (event.chunk < 0 || event.chunk % 2 == 0) return base;
    // 45 % of the way to white: the same hue, plainly another chunk.
    const auto lift = [](int c) { return c + (255 - c) * 45 / 100; };
    return QColor(lift(base.red()), lift(base.green()), lift(base.blue()));
}

// Light grey, the one unsaturated colour: a bubble never reads as a block (recomputation,
// pink, once looked like the old pale-red bubbles).
QColor idle_color() {
    return QColor(0xDC, 0xDC, 0xDC);
}
QColor background_color() {
    return QColor(0xFF, 0xFF, 0xFF);
}
QColor lane_separator_color() {
    return QColor(0xC8, 0xC8, 0xC8);
}
QColor stage_separator_color() {
    return QColor(0x70, 0x70, 0x70);
}
QColor label_text_color() {
    return QColor(0x20, 0x20, 0x20);
}
QColor block_text_color() {
    return QColor(0xFF, 0xFF, 0xFF);
}
QColor axis_color() {
    return QColor(0x50, 0x50, 0x50);
}
QColor selection_color() {
    return QColor(0x00, 0x00, 0x00);
}

} // namespace trident::gui
