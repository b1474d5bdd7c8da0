#include "trident/simulator/time_to_train.h"

#include "trident/core/spec_error.h"
#include "trident/core/units.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>

namespace trident::simulator {
namespace {

// 15.7 M, 3.58 B: three significant digits and a power-of-1000 word.
std::string scaled(double value) {
    const char* units[] = {"", " K", " M", " B", " T"};
    int u = 0;
    while (std::abs(value) >= 1000.0 && u < 4) {
        value /= 1000.0;
        ++u;
    }
    char text[48];
    std::snprintf(text, sizeof text, "%.3g%s", value, units[u]);
    return text;
}

// 41.2 days, 5.30 hours, 12.5 minutes: the largest unit that leaves at least 2 of it.
std::string wall_time(double seconds) {
    char text[48];
    if (seconds >= 2 * 86400.0)
        std::snprintf(text, sizeof text, "%.3g days", seconds / 86400.0);
    else if (seconds >= 2 * 3600.0)
        std::snprintf(text, sizeof text, "%.3g hours", seconds / 3600.0);
    else if (seconds >= 120.0)
        std::snprintf(text, sizeof text, "%.3g minutes", seconds / 60.0);
    else
        std::snprintf(text, sizeof text, "%.3g s", seconds);
    return text;
}

// One line per segment when the run has several: batch, sequence, steps, step time.
std::string segments_text(const TimeToTrain& t) {
    if (t.segments.size() < 2) return "";
    std::string text;
    char line[256];
    // A long ramp (Megatron's GPT-3 recipe has 96 batch sizes) shows its ends.
    const std::size_t n = t.segments.size(), head = n > 8 ? 3 : n, tail = n > 8 ? 2 : 0;
    for (std::size_t i = 0; i < n; ++i) {
        if (i == head && tail > 0) {
            std::snprintf(line, sizeof line, "\n  … %zu more segments", n - head - tail);
            text += line;
            i = n - tail;
        }
        const SegmentTime& s = t.segments[i];
        std::snprintf(
            line, sizeof line, "\n  segment %zu: batch %lld × %lld tokens, %s steps at %.3f s = %s",
            i + 1, (long long)s.segment.global_batch_size, (long long)s.segment.seq_length,
            scaled(double(s.segment.steps)).c_str(), s.step_time_s, wall_time(s.train_s).c_str());
        text += line;
        if (s.goodput < 1.0) {
            std::snprintf(line, sizeof line, " (goodput %.1f %%)", 100 * s.goodput);
            text += line;
        }
        if (!s.layout.empty()) text += ", " + s.layout;
    }
    return text;
}

} // namespace

std::string token_count_text(double tokens) {
    return scaled(tokens);
}

double parse_token_count(const std::string& text, const std::string& field) {
    char* end = nullptr;
    const double number = std::strtod(text.c_str(), &end);
    double scale = 1.0;
    const std::string suffix = end ? std::string(end) : std::string();
    if (suffix == "K" || suffix == "k")
        scale = 1e3;
    else if (suffix == "M")
        scale = 1e6;
    else if (suffix == "B" || suffix == "G")
        scale = 1e9;
    else if (suffix == "T")
        scale = 1e12;
    else if (!suffix.empty())
        scale = 0.0;
    const double tokens = number * scale;
    if (text.empty() || end == text.c_str() || scale == 0.0 || !std::isfinite(tokens) ||
        tokens < 1.0 || tokens > 1e18)
        throw core::SpecError(field, "'" + text +
                                         "' is not a token count (e.g. 15T, 300B, "
                                         "2.5e12; K, M, B and T are powers of 1000)");
    return tokens;
}

TimeToTrain time_to_train(const core::JobSpec& job, double step_time_s, double tokens,
                          std::optional<double> gpu_hour_price, const GoodputOptions& saves) {
    SegmentTime whole;
    whole.segment =
        sequence_segments({{job.training.seq_length, tokens}}, job.training.global_batch_size)
            .front();
    whole.step_time_s = step_time_s;
    return time_to_train(job, {whole}, tokens, gpu_hour_price, saves);
}

TimeToTrain time_to_train(const core::JobSpec& job, std::vector<SegmentTime> segments,
                          double tokens, std::optional<double> gpu_hour_price,
                          const GoodputOptions& saves) {
    TimeToTrain t;
    t.tokens = tokens;
    const SegmentTime* longest = nullptr;
    // Saves run across segments: each segment's work is charged at the rate of the run's save
    // interval (Young's, or --save-interval) at its step time, never cut to its own length.
    std::int64_t run_steps = 0;
    for (const SegmentTime& s : segments) run_steps += s.segment.steps;
    for (SegmentTime& s : segments) {
        t.steps += s.segment.steps;
        t.trained_tokens += s.segment.tokens();
        s.train_s = double(s.segment.steps) * s.step_time_s;
        s.wall_s = s.train_s;
        if (job.cluster.reliability && s.segment.steps > 0) {
            GoodputOptions bounded = saves;
            bounded.run_steps = run_steps;
            const Goodput g = goodput(job, *job.cluster.reliability, s.step_time_s, bounded);
            s.goodput = g.fraction;
            s.wall_s =
                g.fraction > 0 ? s.train_s / g.fraction : std::numeric_limits<double>::infinity();
            if (!longest || s.train_s > longest->train_s) t.goodput = g;
        }
        if (!longest || s.train_s > longest->train_s) longest = &s;
        t.train_s += s.train_s;
        t.wall_s += s.wall_s;
    }
    if (t.goodput) {
        t.goodput->fraction = t.wall_s > 0 ? t.train_s / t.wall_s : 0.0;
        t.failures = t.wall_s / t.goodput->mtbf_s;
    }
    t.gpu_hours = double(job.cluster.devices()) * t.wall_s / 3600.0;
    if (gpu_hour_price) t.cost = t.gpu_hours * *gpu_hour_price;
    t.segments = std::move(segments);
    return t;
}

std::string time_to_train_text(const TimeToTrain& t) {
    std::string text = scaled(t.tokens) + " tokens: " + scaled(double(t.steps)) + " steps, " +
                       wall_time(t.train_s) + " of steps";
    if (!t.goodput) {
        text += ", " + scaled(t.gpu_hours) + " GPU-hours";
        if (t.cost) text += ", cost " + scaled(*t.cost);
        return text + " (step time only: the cluster gives no reliability figures)" +
               segments_text(t);
    }
    const Goodput& g = *t.goodput;
    char line[512];
    std::snprintf(line, sizeof line,
                  "; expected %s with failures and saves (goodput %.1f %%), %s GPU-hours",
                  wall_time(t.wall_s).c_str(), 100 * g.fraction, scaled(t.gpu_hours).c_str());
    text += line;
    if (t.cost) text += ", cost " + scaled(*t.cost);
    std::snprintf(line, sizeof line,
                  "\n  failures: one per %s, %s expected; checkpoint %s, saved every %s steps "
                  "(%s; Young's optimum %s), each save blocking %s; restart %s",
                  wall_time(g.mtbf_s).c_str(), scaled(t.failures).c_str(),
                  core::bytes_text(g.checkpoint.bytes).c_str(),
                  scaled(double(g.interval_steps)).c_str(), wall_time(g.interval_s).c_str(),
                  wall_time(g.young_interval_s).c_str(), wall_time(g.save_s).c_str(),
                  wall_time(g.restart_s).c_str());
    text += line;
    text += g.relaunch_counted ? "" : " (the checkpoint load; relaunch not counted: no relaunch_s)";
    return text + segments_text(t);
}

core::Json to_json(const TimeToTrain& t) {
    core::Json j = {
        {"tokens", t.tokens},   {"steps", t.steps},   {"trained_tokens", t.trained_tokens},
        {"train_s", t.train_s}, {"wall_s", t.wall_s}, {"gpu_hours", t.gpu_hours}};
    if (t.cost) j["cost"] = *t.cost;
    if (t.segments.size() > 1) {
        core::Json segments = core::Json::array();
        for (const SegmentTime& s : t.segments) {
            core::Json row = {{"global_batch_size", s.segment.global_batch_size},
                              {"seq_length", s.segment.seq_length},
                              {"steps", s.segment.steps},
                              {"step_time_s", s.step_time_s},
                              {"train_s", s.train_s},
                              {"wall_s", s.wall_s}};
            if (!s.layout.empty()) row["layout"] = s.layout;
            segments.push_back(row);
        }
        j["segments"] = segments;
    }
    if (t.goodput) {
        const Goodput& g = *t.goodput;
        j["failures"] = {{"mtbf_s", g.mtbf_s},
                         {"expected_failures", t.failures},
                         {"checkpoint_bytes", g.checkpoint.bytes},
                         {"checkpoint_write_s", g.checkpoint.write_s},
                         {"checkpoint_read_s", g.checkpoint.read_s},
                         {"save_blocking_s", g.save_s},
                         {"restart_s", g.restart_s},
                         {"relaunch_counted", g.relaunch_counted},
                         {"young_interval_s", g.young_interval_s},
                         {"save_interval_steps", g.interval_steps},
                         {"save_interval_s", g.interval_s},
                         {"goodput", g.fraction}};
    }
    return j;
}

} // namespace trident::simulator
