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

} // namespace

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
    TimeToTrain t;
    t.tokens = tokens;
    const double per_step = double(job.training.tokens_per_step());
    t.steps = std::int64_t(std::ceil(tokens / per_step));
    t.trained_tokens = double(t.steps) * per_step;
    t.train_s = double(t.steps) * step_time_s;
    t.wall_s = t.train_s;
    if (job.cluster.reliability) {
        GoodputOptions bounded = saves;
        bounded.run_steps = t.steps;
        t.goodput = goodput(job, *job.cluster.reliability, step_time_s, bounded);
        t.wall_s = t.goodput->fraction > 0 ? t.train_s / t.goodput->fraction
                                           : std::numeric_limits<double>::infinity();
        t.failures = t.wall_s / t.goodput->mtbf_s;
    }
    t.gpu_hours = double(job.cluster.devices()) * t.wall_s / 3600.0;
    if (gpu_hour_price) t.cost = t.gpu_hours * *gpu_hour_price;
    return t;
}

std::string time_to_train_text(const TimeToTrain& t) {
    std::string text = scaled(t.tokens) + " tokens: " + scaled(double(t.steps)) + " steps, " +
                       wall_time(t.train_s) + " of steps";
    if (!t.goodput) {
        text += ", " + scaled(t.gpu_hours) + " GPU-hours";
        if (t.cost) text += ", cost " + scaled(*t.cost);
        return text + " (step time only: the cluster gives no reliability figures)";
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
    return text;
}

core::Json to_json(const TimeToTrain& t) {
    core::Json j = {
        {"tokens", t.tokens},   {"steps", t.steps},   {"trained_tokens", t.trained_tokens},
        {"train_s", t.train_s}, {"wall_s", t.wall_s}, {"gpu_hours", t.gpu_hours}};
    if (t.cost) j["cost"] = *t.cost;
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
