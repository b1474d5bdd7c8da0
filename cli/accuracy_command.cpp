// `trident accuracy`: the simulator against published end-to-end training runs.
#include "command.h"
#include "trident/core/atomic_file.h"
#include "trident/core/json_io.h"
#include "trident/core/spec_error.h"
#include "trident/simulator/accuracy.h"
#include "trident/simulator/report.h"
#include "trident/simulator/simulate.h"

#include <cmath>
#include <cstdio>
#include <iostream>
#include <map>
#include <memory>

namespace trident::cli {
namespace {

struct AccuracyOptions {
    std::string runs;     // another table (a trident.published-runs/1 file)
    std::string category; // only rows whose category text contains this
    std::string show;     // one run's whole simulate report
    std::string json;
};

std::string metric_label(simulator::PublishedMetric m) {
    switch (m) {
    case simulator::PublishedMetric::tokens_per_s_per_gpu:
        return "tokens/s/GPU";
    case simulator::PublishedMetric::model_tflops_per_gpu:
        return "TFLOP/s/GPU";
    case simulator::PublishedMetric::hardware_tflops_per_gpu:
        return "HW TFLOP/s/GPU";
    case simulator::PublishedMetric::mfu:
        return "MFU";
    case simulator::PublishedMetric::max_allocated_mib:
        return "max alloc MiB";
    case simulator::PublishedMetric::max_reserved_mib:
        return "max resv MiB";
    }
    return "";
}

std::string value_text(simulator::PublishedMetric m, double v) {
    char text[32];
    if (m == simulator::PublishedMetric::mfu)
        std::snprintf(text, sizeof text, "%.1f %%", 100 * v);
    else
        std::snprintf(text, sizeof text, v >= 1000 ? "%.0f" : "%.1f", v);
    return text;
}

// `text` padded to `width` characters as they show (a "·" is two bytes of UTF-8, one column).
std::string padded(const std::string& text, std::size_t width) {
    std::size_t shown = 0;
    for (const char c : text) shown += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
    return shown >= width ? text : text + std::string(width - shown, ' ');
}

void print_rows(const std::vector<simulator::AccuracyRow>& rows, std::ostream& out) {
    char line[512];
    std::snprintf(line, sizeof line, "%-42s %-26s %-15s %10s %10s %7s %8s %7s\n", "run", "category",
                  "metric", "published", "predicted", "error", "step s", "memory");
    out << line;
    for (const simulator::AccuracyRow& r : rows) {
        if (!r.simulated()) continue;
        std::snprintf(line, sizeof line, "%-42s %s %-15s %10s %10s %+6.0f%% %8.3f %6.0f%%\n",
                      r.run->name.c_str(), padded(r.category.text(), 26).c_str(),
                      metric_label(r.run->metric).c_str(),
                      value_text(r.run->metric, r.run->value).c_str(),
                      value_text(r.run->metric, r.predicted).c_str(), 100 * r.error, r.step_time_s,
                      100 * r.peak_memory_fraction);
        out << line;
    }
    bool header = false;
    for (const simulator::AccuracyRow& r : rows) {
        if (r.simulated()) continue;
        if (!header) out << "\nnot expressible in Trident yet (each run's own loading error):\n";
        header = true;
        out << "  " << r.run->name << ": " << r.not_expressible << "\n";
    }
}

void print_summaries(const std::vector<simulator::AccuracyRow>& rows, std::ostream& out) {
    std::map<std::string, std::vector<simulator::AccuracyRow>> by;
    for (const simulator::AccuracyRow& r : rows) {
        if (r.simulated()) by[r.category.text()].push_back(r);
        // Throughput and memory figures are summarised apart (not-expressible rows with the
        // throughput ones: their metric is known, their category is not).
        by[simulator::is_memory_metric(r.run->metric) ? "all memory" : "all"].push_back(r);
    }
    char line[256];
    std::snprintf(line, sizeof line, "\n%-26s %5s %8s %11s %12s   %s\n", "by category", "runs",
                  "median", "median |e|", "within 10 %", "range");
    out << line;
    for (const auto& [name, list] : by) {
        const simulator::ErrorSummary s = simulator::summarize(list);
        if (s.runs == 0) continue;
        std::snprintf(
            line, sizeof line, "%s %5zu %+7.0f%% %10.0f%% %11.0f%%   %+.0f%% .. %+.0f%%\n",
            padded(name, 26).c_str(), s.runs, 100 * s.median_error, 100 * s.median_abs_error,
            100 * s.within_10, 100 * s.min_error, 100 * s.max_error);
        out << line;
    }
}

core::Json rows_json(const std::vector<simulator::AccuracyRow>& rows) {
    core::Json j;
    j["format"] = "trident.accuracy/1";
    core::Json list = core::Json::array();
    for (const simulator::AccuracyRow& r : rows) {
        core::Json row = {
            {"name", r.run->name},
            {"source", r.run->source},
            {"metric", std::string(simulator::kPublishedMetricNames[int(r.run->metric)])},
            {"published", r.run->value}};
        if (r.simulated()) {
            row["category"] = r.category.text();
            row["predicted"] = r.predicted;
            row["error"] = r.error;
            row["step_time_s"] = r.step_time_s;
            row["peak_memory_fraction"] = r.peak_memory_fraction;
        } else {
            row["not_expressible"] = r.not_expressible;
        }
        list.push_back(row);
    }
    j["runs"] = list;
    const auto summary = [&](bool memory) {
        std::vector<simulator::AccuracyRow> chosen;
        for (const simulator::AccuracyRow& r : rows)
            if (simulator::is_memory_metric(r.run->metric) == memory) chosen.push_back(r);
        const simulator::ErrorSummary s = simulator::summarize(chosen);
        return core::Json{{"runs", s.runs},
                          {"not_expressible", s.not_expressible},
                          {"median_error", s.median_error},
                          {"median_abs_error", s.median_abs_error},
                          {"min_error", s.min_error},
                          {"within_10", s.within_10}};
    };
    j["summary"] = summary(false);
    j["memory_summary"] = summary(true);
    return j;
}

} // namespace

Command add_accuracy_command(CLI::App& app) {
    auto options = std::make_shared<AccuracyOptions>();
    Command c;
    c.app = app.add_subcommand(
        "accuracy", "Simulate published training runs with their layouts pinned and print "
                    "predicted against published, with the error per category");
    c.app->add_option("--runs", options->runs,
                      "A trident.published-runs/1 file instead of the shipped table");
    c.app->add_option("--category", options->category,
                      "Only runs whose category contains this text (moe, hopper, fp8, …)");
    c.app->add_option("--show", options->show, "Print the whole simulate report of this run");
    c.app->add_option("--json", options->json, "Write the rows and the summary as JSON");
    c.run = [options] {
        std::vector<simulator::PublishedRun> own;
        if (!options->runs.empty())
            own = simulator::published_runs_from_json(core::read_json_file(options->runs, "--runs"),
                                                      "--runs");
        const std::vector<simulator::PublishedRun>& runs =
            options->runs.empty() ? simulator::shipped_published_runs() : own;
        if (!options->show.empty()) {
            for (const simulator::PublishedRun& run : runs)
                if (run.name == options->show) {
                    const simulator::AccuracyRow row = simulator::evaluate_run(run);
                    if (!row.simulated()) throw core::SpecError("--show", row.not_expressible);
                    std::cout << run.name << ": " << run.source << "\n";
                    if (!run.note.empty()) std::cout << "assumed: " << run.note << "\n";
                    std::cout << "published " << metric_label(run.metric) << " "
                              << value_text(run.metric, run.value) << ", predicted "
                              << value_text(run.metric, row.predicted) << " ("
                              << (row.error >= 0 ? "+" : "") << int(std::lround(100 * row.error))
                              << " %)\n\n";
                    simulator::print_report(simulator::simulate_published_run(run), std::cout,
                                            simulator::StageRows::summary);
                    return 0;
                }
            std::vector<std::string_view> names;
            for (const auto& run : runs) names.push_back(run.name);
            std::string reason = "no published run \"" + options->show + "\"";
            if (auto hint = core::closest_word(options->show, names); !hint.empty())
                reason += " (did you mean '" + hint + "'?)";
            throw core::SpecError("--show", reason + "; trident accuracy lists them");
        }
        std::vector<simulator::AccuracyRow> rows;
        for (const simulator::PublishedRun& run : runs) {
            simulator::AccuracyRow row = simulator::evaluate_run(run);
            if (!options->category.empty() && row.simulated() &&
                row.category.text().find(options->category) == std::string::npos)
                continue;
            rows.push_back(std::move(row));
        }
        if (rows.empty())
            throw core::SpecError("--category", "no published run's category contains \"" +
                                                    options->category + "\"");
        if (!options->json.empty())
            core::write_file_atomically(options->json, rows_json(rows).dump(2) + "\n", "--json");
        std::cout << "Published training runs simulated with their layouts pinned and the shipped "
                     "profiles (error = predicted / published − 1):\n";
        print_rows(rows, std::cout);
        print_summaries(rows, std::cout);
        return 0;
    };
    return c;
}

} // namespace trident::cli
