#include "trident/simulator/time_to_train.h"

#include "trident/core/spec_error.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

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
                          std::optional<double> gpu_hour_price) {
    TimeToTrain t;
    t.tokens = tokens;
    const double per_step = double(job.training.tokens_per_step());
    t.steps = std::int64_t(std::ceil(tokens / per_step));
    t.trained_tokens = double(t.steps) * per_step;
    t.train_s = double(t.steps) * step_time_s;
    t.gpu_hours = double(job.cluster.devices()) * t.train_s / 3600.0;
    if (gpu_hour_price) t.cost = t.gpu_hours * *gpu_hour_price;
    return t;
}

std::string time_to_train_text(const TimeToTrain& t) {
    std::string text = scaled(t.tokens) + " tokens: " + scaled(double(t.steps)) + " steps, " +
                       wall_time(t.train_s) + ", " + scaled(t.gpu_hours) + " GPU-hours";
    if (t.cost) text += ", cost " + scaled(*t.cost);
    return text + " (step time only: no failures, checkpoints or evaluation)";
}

core::Json to_json(const TimeToTrain& t) {
    core::Json j = {{"tokens", t.tokens},
                    {"steps", t.steps},
                    {"trained_tokens", t.trained_tokens},
                    {"train_s", t.train_s},
                    {"gpu_hours", t.gpu_hours}};
    if (t.cost) j["cost"] = *t.cost;
    return j;
}

} // namespace trident::simulator
