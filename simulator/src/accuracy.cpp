#include "trident/simulator/accuracy.h"

#include "trident/core/job_loader.h"
#include "trident/core/presets.h"
#include "trident/core/spec_error.h"
#include "trident/core/step_numbers.h"
#include "trident/core/units.h"
#include "trident/simulator/simulate.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <mutex>

namespace trident::simulator {
namespace {

PublishedMetric parse_metric(const std::string& word, const std::string& field) {
    for (std::size_t i = 0; i < kPublishedMetricNames.size(); ++i)
        if (kPublishedMetricNames[i] == word) return PublishedMetric(i);
    std::string names;
    for (auto n : kPublishedMetricNames) names += (names.empty() ? "" : ", ") + std::string(n);
    throw core::SpecError(field, "unknown metric \"" + word + "\" (one of " + names + ")");
}

PublishedRun run_from_json(const core::Json& j, const std::string& field) {
    core::ObjectReader r(j, field);
    PublishedRun run;
    run.name = r.string("name");
    run.source = r.string("source");
    run.note = r.string_or("note", "");
    const core::Json& plan = r.require("plan");
    if (!plan.is_string() && !plan.is_object())
        throw core::SpecError(r.field("plan"), "must be a plan preset's name or a trident.plan/1 "
                                               "object");
    run.plan = plan;
    core::ObjectReader p(r.require("published"), r.field("published"));
    run.metric = parse_metric(p.string("metric"), p.field("metric"));
    run.value = p.number("value", 1e-9, 1e12);
    if (p.has("stage")) {
        if (!is_memory_metric(run.metric))
            throw core::SpecError(p.field("stage"), "only a memory figure names its pipeline "
                                                    "stage; a throughput is the whole job's");
        const core::Json& stage = p.require("stage");
        run.stage = stage.is_string() && stage.get<std::string>() == "last"
                        ? -1
                        : std::int32_t(p.integer("stage", 0, 1 << 20));
    }
    if (run.metric == PublishedMetric::mfu && run.value > 1.0)
        throw core::SpecError(p.field("value"), "an MFU is a fraction (0.43, not 43), got " +
                                                    std::to_string(run.value));
    p.finish();
    r.finish();
    return run;
}

double predicted_value(const Report& r, const PublishedRun& run) {
    const PublishedMetric metric = run.metric;
    const double devices = double(r.job.cluster.devices());
    switch (metric) {
    case PublishedMetric::tokens_per_s_per_gpu:
        return r.tokens_per_s / devices;
    case PublishedMetric::model_tflops_per_gpu:
        return r.tflops_per_device;
    case PublishedMetric::hardware_tflops_per_gpu:
        return r.hfu * r.peak_flops_per_s / 1e12;
    case PublishedMetric::mfu:
        return r.mfu;
    case PublishedMetric::max_allocated_mib:
    case PublishedMetric::max_reserved_mib:
        break;
    }
    const std::size_t stage = run.stage < 0 ? r.stages.size() - 1 : std::size_t(run.stage);
    if (stage >= r.stages.size())
        throw core::SpecError("published run " + run.name + ".published.stage",
                              "stage " + std::to_string(run.stage) + " of a " +
                                  std::to_string(r.stages.size()) + "-stage pipeline");
    const StageMemory& m = r.stages[stage].memory;
    // Megatron's "MB" is MiB (report_memory divides by 2^20).
    return (metric == PublishedMetric::max_allocated_mib ? m.allocated_bytes()
                                                         : m.reserved_bytes()) /
           core::kMiB;
}

struct LoadedRun {
    core::JobSpec job;
    const core::Profile& profile;
};

// A device's shipped profile, read once per process (the tables are large).
const core::Profile& shipped_profile(const std::string& device) {
    static std::mutex mutex;
    static std::map<std::string, core::Profile> profiles;
    const std::lock_guard lock(mutex);
    auto it = profiles.find(device);
    if (it == profiles.end()) {
        const core::Json j =
            core::resolve_reference(device, core::PresetKind::profile, "cluster.device");
        it = profiles.emplace(device, core::Profile::from_json(j, "profile " + device)).first;
    }
    return it->second;
}

// The run's job and its device's shipped profile (never ./DEVICE.json or the user's folder:
// the table checks what Trident ships). SpecError when the run cannot be expressed.
LoadedRun load_run(const PublishedRun& run) {
    core::JobSpec job = core::load_job(run.plan, "published run " + run.name);
    const core::Profile& profile = shipped_profile(job.cluster.device);
    return {std::move(job), profile};
}

std::string percent(double fraction) {
    char text[32];
    std::snprintf(text, sizeof text, "%+.0f %%", 100.0 * fraction);
    return text;
}

} // namespace

std::vector<PublishedRun> published_runs_from_json(const core::Json& j, const std::string& field) {
    core::ObjectReader top(j, field);
    top.expect_format("trident.published-runs/1");
    top.string_or("description", "");
    const core::Json& runs = top.require("runs");
    if (!runs.is_array()) throw core::SpecError(top.field("runs"), "must be an array of runs");
    std::vector<PublishedRun> out;
    for (std::size_t i = 0; i < runs.size(); ++i) {
        out.push_back(run_from_json(runs[i], top.field("runs") + "[" + std::to_string(i) + "]"));
        for (std::size_t k = 0; k + 1 < out.size(); ++k)
            if (out[k].name == out.back().name)
                throw core::SpecError(top.field("runs") + "[" + std::to_string(i) + "].name",
                                      "\"" + out.back().name + "\" is listed twice");
    }
    top.finish();
    return out;
}

const std::vector<PublishedRun>& shipped_published_runs() {
    static const std::vector<PublishedRun> runs = [] {
        const core::EmbeddedPreset* p =
            core::find_preset(core::PresetKind::published_runs, "published-runs");
        if (!p) return std::vector<PublishedRun>{};
        return published_runs_from_json(core::parse_json_text(p->text, "preset published-runs"),
                                        "published-runs");
    }();
    return runs;
}

std::string RunCategory::text() const {
    return (quantity.empty() ? "" : quantity + " · ") + kind + " · " +
           (architecture.empty() ? "unknown device" : architecture) + " · " + precision;
}

RunCategory category_of(const core::JobSpec& job, const core::Profile& profile) {
    RunCategory c;
    c.kind = job.model.moe ? "moe" : "dense";
    c.architecture = profile.architecture();
    switch (job.plan.fp8.recipe) {
    case core::Fp8Recipe::none:
        c.precision = "bf16";
        break;
    case core::Fp8Recipe::mxfp8:
    case core::Fp8Recipe::nvfp4:
        c.precision = core::precision_name(job.plan.fp8.recipe);
        break;
    default:
        c.precision = "fp8";
        break;
    }
    return c;
}

Report simulate_published_run(const PublishedRun& run) {
    const LoadedRun loaded = load_run(run);
    return simulate(loaded.job, loaded.profile);
}

AccuracyRow evaluate_run(const PublishedRun& run) {
    AccuracyRow row;
    row.run = &run;
    try {
        const LoadedRun loaded = load_run(run);
        row.category = category_of(loaded.job, loaded.profile);
        if (is_memory_metric(run.metric)) row.category.quantity = "memory";
        const Report report = simulate(loaded.job, loaded.profile);
        row.predicted = predicted_value(report, run);
        row.error = row.predicted / run.value - 1.0;
        row.step_time_s = report.step_time_s;
        for (const StageReport& s : report.stages)
            row.peak_memory_fraction = std::max(
                row.peak_memory_fraction, s.memory.total_bytes() / report.memory_capacity_bytes);
    } catch (const core::SpecError& e) {
        row.not_expressible = e.what();
    }
    return row;
}

ErrorSummary summarize(std::span<const AccuracyRow> rows) {
    ErrorSummary s;
    std::vector<double> errors, magnitudes;
    for (const AccuracyRow& r : rows) {
        if (!r.simulated()) {
            ++s.not_expressible;
            continue;
        }
        errors.push_back(r.error);
        magnitudes.push_back(std::abs(r.error));
    }
    s.runs = errors.size();
    if (errors.empty()) return s;
    s.median_error = core::median(errors);
    s.median_abs_error = core::median(magnitudes);
    s.min_error = *std::min_element(errors.begin(), errors.end());
    s.max_error = *std::max_element(errors.begin(), errors.end());
    s.within_10 = double(std::count_if(magnitudes.begin(), magnitudes.end(),
                                       [](double e) { return e <= 0.10; })) /
                  double(errors.size());
    return s;
}

std::optional<ErrorBand> expected_error_band(const RunCategory& category) {
    // Each shipped run is loaded (for its category) and simulated at most once per process.
    static std::mutex mutex;
    static std::map<std::string, std::optional<RunCategory>> categories;
    static std::map<std::string, AccuracyRow> rows;
    const std::lock_guard lock(mutex);
    const auto& runs = shipped_published_runs();
    for (const PublishedRun& run : runs) {
        if (categories.contains(run.name)) continue;
        if (is_memory_metric(run.metric)) { // a memory figure says nothing of throughput
            categories[run.name] = std::nullopt;
            continue;
        }
        try {
            const LoadedRun loaded = load_run(run);
            categories[run.name] = category_of(loaded.job, loaded.profile);
        } catch (const core::SpecError&) {
            categories[run.name] = std::nullopt;
        }
    }
    const auto matching = [&](auto&& same) {
        std::vector<AccuracyRow> chosen;
        for (const PublishedRun& run : runs) {
            const auto& c = categories[run.name];
            if (!c || !same(*c)) continue;
            auto it = rows.find(run.name);
            if (it == rows.end()) it = rows.emplace(run.name, evaluate_run(run)).first;
            chosen.push_back(it->second);
        }
        return chosen;
    };
    const std::vector<std::pair<std::string, std::function<bool(const RunCategory&)>>> scopes = {
        {category.text(), [&](const RunCategory& c) { return c == category; }},
        {category.kind + " · " + category.architecture,
         [&](const RunCategory& c) {
             return c.kind == category.kind && c.architecture == category.architecture;
         }},
        {category.kind, [&](const RunCategory& c) { return c.kind == category.kind; }}};
    // Widening past the device generation only among generations the table knows: a CPU
    // profile's or an unknown device's job has no band.
    bool known_architecture = false;
    for (const auto& [name, c] : categories)
        known_architecture = known_architecture || (c && c->architecture == category.architecture);
    if (category.architecture.empty() || !known_architecture) return std::nullopt;
    for (const auto& [scope, same] : scopes) {
        const std::vector<AccuracyRow> chosen = matching(same);
        const ErrorSummary s = summarize(chosen);
        // Fewer than three runs say little about a band: widen the scope.
        if (s.runs >= 3) return ErrorBand{scope, s};
    }
    return std::nullopt;
}

std::string error_band_line(const RunCategory& category) {
    const std::optional<ErrorBand> band = expected_error_band(category);
    if (!band)
        return "expected error: no published runs on " +
               (category.architecture.empty() ? std::string("this device")
                                              : category.architecture + " devices") +
               " to compare with (trident accuracy lists those it has)";
    const ErrorSummary& s = band->summary;
    return "expected error (published runs, " + band->scope + ": " + std::to_string(s.runs) +
           " runs; trident accuracy lists them): median " + percent(s.median_error) + ", from " +
           percent(s.min_error) + " to " + percent(s.max_error);
}

} // namespace trident::simulator
