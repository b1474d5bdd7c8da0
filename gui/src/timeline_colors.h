#pragma once
// The timeline's colour table, in one place: the widget, the PNG and SVG exports, the compare
// view, the planner panel and the tests all read colours from here, so a block's colour in a
// picture says which kind of work it is.
#include "trident/core/trace.h"

#include <QColor>
#include <cstdint>
#include <string_view>

namespace trident::gui {

// What a block is drawn as: the trace's eleven event kinds fold into six categories (all
// point-to-point and collective traffic is "communication").
enum class BlockCategory : std::uint8_t {
    forward,
    backward_input,
    backward_weight,
    recompute,
    communication,
    optimizer,
};
inline constexpr int kBlockCategoryCount = 6;
inline constexpr std::string_view kBlockCategoryNames[] = {
    "forward", "backward (input)", "backward (weight)", "recompute", "communication", "optimizer"};

BlockCategory block_category(core::EventKind kind);

QColor category_color(BlockCategory category);
QColor kind_color(core::EventKind kind);
// A single event's block: its kind's colour, lighter for the odd model chunks (the second
// chunk of interleaved 1F1B, ZB-V and DualPipe(V)), so neighbouring chunks are told apart.
QColor event_color(const core::TraceEvent& event);

// Time inside the step when a lane's compute stream does nothing: the pipeline bubbles.
QColor idle_color();
QColor background_color();
QColor lane_separator_color();
QColor stage_separator_color(); // closes a group of rank lanes of one stage
QColor label_text_color();
QColor block_text_color();
QColor axis_color();
QColor selection_color();

} // namespace trident::gui
