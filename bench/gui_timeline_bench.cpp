// Benchmark: the GUI timeline on a 200 000-event trace (the speed targets: open in
// under 2 s including the JSON parse from a file, repaint in under 50 ms). Writes a generated
// trace (16 pipeline stages, one rank each, 1F1B-like compute and point-to-point traffic) to a
// temporary file, then times: reading and parsing the file, turning it into a Trace, building
// the TimelineModel; and building the display list plus painting it into a 1600x900 QImage for
// the whole step, the step collapsed to stages, and a zoom to 1% and 0.01% of it. Then the same
// 200 000 events spread over 1024 ranks (64 per stage, built in memory): a repaint of the whole
// step with the lanes at the top, scrolled to the middle and to the end (lanes keep their
// minimum height and scroll, so only the window's lanes are drawn), and collapsed. Prints
// min / median / max. `gui_timeline_bench [repetitions] [trace.json]` benches a given file
// instead. Runs on Qt's offscreen platform.
#include "timeline_display_list.h"
#include "timeline_layout.h"
#include "timeline_model.h"
#include "timeline_render.h"
#include "trident/core/json_io.h"
#include "trident/core/trace.h"

#include <QDir>
#include <QFileInfo>
#include <QGuiApplication>
#include <QImage>
#include <QPainter>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

using namespace trident;

namespace {

// `ranks_per_stage` ranks per stage, numbered stage * 64 + r, each with the stage's schedule.
core::Trace generated_trace(std::size_t target_events, int ranks_per_stage = 1) {
    constexpr int kStages = 16;
    constexpr double kForwardS = 1.0e-3;
    constexpr double kP2pS = 0.1e-3;
    core::Trace trace;
    trace.source = "simulated";
    trace.events.reserve(target_events);
    const std::size_t microbatches =
        target_events / kStages / static_cast<std::size_t>(ranks_per_stage) / 5;
    int rank_in_stage = 0;
    auto add = [&](int stage, core::Stream stream, core::EventKind kind, std::size_t mb,
                   double start_s, double length_s) {
        core::TraceEvent e;
        e.rank = stage * 64 + rank_in_stage;
        e.stream = stream;
        e.kind = kind;
        e.microbatch = static_cast<std::int32_t>(mb);
        e.chunk = 0;
        e.start_s = start_s;
        e.end_s = start_s + length_s;
        e.bytes = stream == core::Stream::compute ? 0.0 : 6.0e6;
        e.flops = stream == core::Stream::compute ? 2.8e12 : 0.0;
        trace.events.push_back(e);
    };
    for (int stage = 0; stage < kStages; ++stage)
        for (rank_in_stage = 0; rank_in_stage < ranks_per_stage; ++rank_in_stage) {
            double t_s = stage * (kForwardS + kP2pS);
            for (std::size_t mb = 0; mb < microbatches; ++mb) {
                add(stage, core::Stream::compute, core::EventKind::forward, mb, t_s, kForwardS);
                add(stage, core::Stream::pipeline_p2p, core::EventKind::send_activation, mb,
                    t_s + kForwardS, kP2pS);
                t_s += kForwardS + 0.05e-3 * static_cast<double>(mb % 3);
                add(stage, core::Stream::compute, core::EventKind::backward_input, mb, t_s,
                    kForwardS);
                add(stage, core::Stream::compute, core::EventKind::backward_weight, mb,
                    t_s + kForwardS, kForwardS);
                add(stage, core::Stream::pipeline_p2p, core::EventKind::send_gradient, mb,
                    t_s + kForwardS, kP2pS);
                t_s += 2.0 * kForwardS + 0.02e-3;
            }
        }
    return trace;
}

double milliseconds_since(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
        .count();
}

struct Stats {
    double min_ms, median_ms, max_ms;
};

Stats stats(std::vector<double> ms) {
    std::sort(ms.begin(), ms.end());
    return {ms.front(), ms[ms.size() / 2], ms.back()};
}

void print_row(const char* label, const Stats& s, const char* note = "") {
    std::printf("%-44s %9.2f %9.2f %9.2f  %s\n", label, s.min_ms, s.median_ms, s.max_ms, note);
}

struct View {
    const char* label;
    double t0_s, t1_s;
    bool collapsed = false;
    double scroll = 0.0; // fraction of the lanes' scroll range
};

// Build the display list for each view and paint it into a 1600x900 image; one row per view.
void bench_repaints(const gui::TimelineModel& model, int repetitions,
                    const std::vector<View>& views) {
    QImage image(1600, 900, QImage::Format_RGB32);
    for (const View& view : views) {
        gui::TimelineViewport viewport{view.t0_s, view.t1_s, 1600, 900, view.collapsed};
        viewport.scroll_px = view.scroll * gui::layout_timeline(model, viewport).max_scroll_px();
        std::vector<double> build_ms, paint_ms, total_ms;
        std::size_t primitives = 0;
        for (int i = 0; i < repetitions; ++i) {
            const auto start = std::chrono::steady_clock::now();
            const gui::TimelineDisplayList list =
                gui::build_display_list(model, gui::layout_timeline(model, viewport));
            build_ms.push_back(milliseconds_since(start));
            const auto paint_start = std::chrono::steady_clock::now();
            QPainter painter(&image);
            gui::paint_display_list(painter, list);
            painter.end();
            paint_ms.push_back(milliseconds_since(paint_start));
            total_ms.push_back(milliseconds_since(start));
            primitives = list.primitive_count();
        }
        const std::string note = std::to_string(primitives) + " primitives (build " +
                                 std::to_string(stats(build_ms).median_ms).substr(0, 5) +
                                 ", paint " +
                                 std::to_string(stats(paint_ms).median_ms).substr(0, 5) + ")";
        print_row(view.label, stats(total_ms), note.c_str());
    }
}

} // namespace

int main(int argc, char** argv) {
    if (qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM")) qputenv("QT_QPA_PLATFORM", "offscreen");
    QGuiApplication app(argc, argv); // fonts for the labels
    const int repetitions = argc > 1 ? std::max(1, std::atoi(argv[1])) : 10;

    std::string path;
    if (argc > 2) {
        path = argv[2];
    } else {
        path = QDir::temp().filePath("trident_gui_timeline_bench.json").toStdString();
        std::ofstream out(path);
        core::write_chrome_trace(generated_trace(200000), out);
    }

    std::vector<double> parse_ms, trace_ms, model_ms, open_ms;
    std::shared_ptr<gui::TimelineModel> model;
    for (int i = 0; i < std::max(3, repetitions / 3); ++i) {
        const auto start = std::chrono::steady_clock::now();
        const core::Json document = core::read_json_file(path, "trace");
        parse_ms.push_back(milliseconds_since(start));
        const auto trace_start = std::chrono::steady_clock::now();
        core::Trace trace = core::read_chrome_trace(document, path);
        trace_ms.push_back(milliseconds_since(trace_start));
        const auto model_start = std::chrono::steady_clock::now();
        model = std::make_shared<gui::TimelineModel>(std::move(trace));
        model_ms.push_back(milliseconds_since(model_start));
        open_ms.push_back(milliseconds_since(start));
    }
    std::printf("%s (%.1f MB): %zu events, %zu rank lanes, %d stages, step %.3f s\n\n",
                path.c_str(),
                static_cast<double>(QFileInfo(QString::fromStdString(path)).size()) / 1e6,
                model->events().size(), model->lanes(false).size(), model->stage_count(),
                model->step_length_s());
    std::printf("%-44s %9s %9s %9s\n", "ms", "min", "median", "max");
    print_row("read + parse JSON file", stats(parse_ms));
    print_row("JSON -> Trace", stats(trace_ms));
    print_row("Trace -> TimelineModel", stats(model_ms));
    print_row("open total (target < 2000)", stats(open_ms));

    const double t0_s = model->step_start_s();
    const double length_s = model->step_length_s();
    bench_repaints(
        *model, repetitions,
        {
            {"repaint 1600x900, whole step (target < 50)", t0_s, t0_s + length_s},
            {"repaint 1600x900, whole step, collapsed", t0_s, t0_s + length_s, true},
            {"repaint 1600x900, zoom to 1%", t0_s + 0.5 * length_s, t0_s + 0.51 * length_s},
            {"repaint 1600x900, zoom to 0.01%", t0_s + 0.5 * length_s, t0_s + 0.5001 * length_s},
        });

    const gui::TimelineModel ranks(generated_trace(200000, 64));
    std::printf("\n1024 ranks (in memory): %zu events, %zu rank lanes, %d stages\n\n",
                ranks.events().size(), ranks.lanes(false).size(), ranks.stage_count());
    const double r0_s = ranks.step_start_s();
    const double r1_s = r0_s + ranks.step_length_s();
    bench_repaints(ranks, repetitions,
                   {
                       {"1024 ranks, whole step, top (target < 50)", r0_s, r1_s},
                       {"1024 ranks, whole step, scrolled to middle", r0_s, r1_s, false, 0.5},
                       {"1024 ranks, whole step, scrolled to end", r0_s, r1_s, false, 1.0},
                       {"1024 ranks, whole step, collapsed", r0_s, r1_s, true},
                   });
    if (argc <= 2) std::remove(path.c_str());
    return 0;
}
