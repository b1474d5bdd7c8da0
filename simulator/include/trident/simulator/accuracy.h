#pragma once
// The simulator against published end-to-end training runs (`trident accuracy`): a table of
// runs, each a plan with the published layout pinned and the figure its authors measured, is
// simulated with the shipped profile of its device, and the signed errors are summarised per
// category (dense or MoE × device generation × precision). `plan` and `simulate` print the
// band of the job's category from the same table. The runs are checks, never inputs: no
// constant anywhere is set from them.
#include "trident/core/job.h"
#include "trident/core/json_io.h"
#include "trident/core/profile.h"

#include <array>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace trident::simulator {

// The figure a run's authors published, in their unit.
enum class PublishedMetric {
    tokens_per_s_per_gpu,
    model_tflops_per_gpu,    // model FLOPs per step / step time / GPUs (Narayanan's count)
    hardware_tflops_per_gpu, // recomputation included
    mfu,                     // a fraction of the BF16 peak
    // Peak memory of one rank as Megatron's report_memory prints it, in MiB: "max allocated"
    // (torch.cuda.max_memory_allocated) and "max reserved" (max_memory_reserved).
    max_allocated_mib,
    max_reserved_mib
};
inline constexpr std::array<std::string_view, 6> kPublishedMetricNames = {
    "tokens_per_s_per_gpu", "model_tflops_per_gpu", "hardware_tflops_per_gpu", "mfu",
    "max_allocated_mib",    "max_reserved_mib"};
inline bool is_memory_metric(PublishedMetric m) {
    return m == PublishedMetric::max_allocated_mib || m == PublishedMetric::max_reserved_mib;
}

struct PublishedRun {
    std::string name;
    std::string source; // where the figure and the layout are printed
    std::string note;   // what the source leaves unsaid and the plan assumes
    core::Json plan;    // a trident.plan/1 object, or a plan preset's name
    PublishedMetric metric = PublishedMetric::tokens_per_s_per_gpu;
    double value = 0.0;
    // A memory figure's pipeline stage (the rank that printed it): "published.stage", a number
    // or "last"; -1 for the last. Throughput figures are the whole job's.
    std::int32_t stage = 0;
};

// A `trident.published-runs/1` document; SpecError naming the field otherwise.
std::vector<PublishedRun> published_runs_from_json(const core::Json& j, const std::string& field);
// The table shipped in profiles/accuracy/published-runs.json (compiled in).
const std::vector<PublishedRun>& shipped_published_runs();

// dense|moe × the profile's architecture × bf16|fp8|mxfp8|nvfp4; memory figures apart
// (`quantity` "memory"), summarised on their own and never in a throughput band.
struct RunCategory {
    std::string kind, architecture, precision;
    std::string quantity;     // "" (throughput) or "memory"
    std::string text() const; // "dense · hopper · fp8", "memory · dense · hopper · bf16"
    bool operator==(const RunCategory&) const = default;
};
RunCategory category_of(const core::JobSpec& job, const core::Profile& profile);

struct AccuracyRow {
    const PublishedRun* run = nullptr;
    RunCategory category;
    double predicted = 0.0; // in the run's metric
    double error = 0.0;     // predicted / published − 1
    double step_time_s = 0.0;
    double peak_memory_fraction = 0.0; // of the device's memory, the busiest stage
    // Why the run cannot be simulated (an unsupported option, a layout that does not load):
    // the loader's or simulator's own message. Empty when simulated.
    std::string not_expressible;
    bool simulated() const { return not_expressible.empty(); }
};

// Simulates one run with the shipped profile of its cluster's device; SpecError (the loader's
// or the simulator's) when the run cannot be expressed.
struct Report;
Report simulate_published_run(const PublishedRun& run);
// The same as a row: a run that cannot be expressed says why instead of throwing.
AccuracyRow evaluate_run(const PublishedRun& run);

struct ErrorSummary {
    std::size_t runs = 0;            // simulated
    std::size_t not_expressible = 0; // in the category but not simulated
    double median_error = 0.0;       // signed
    double median_abs_error = 0.0;
    double min_error = 0.0, max_error = 0.0;
    double within_10 = 0.0; // share with |error| ≤ 10 %
};
ErrorSummary summarize(std::span<const AccuracyRow> rows);

// The expected error of a job of `category`: the shipped runs of that category, else of its
// kind and architecture, else of its kind (`scope` says which was used), each only with three
// runs or more; nullopt for a device generation the table has no run on (a CPU profile).
struct ErrorBand {
    std::string scope;
    ErrorSummary summary;
};
std::optional<ErrorBand> expected_error_band(const RunCategory& category);
// One line for `plan` and `simulate`: "expected error (published runs, dense · hopper · fp8:
// 7 runs): median −3 %, from −12 % to +9 %"; says so when no run of the kind exists.
std::string error_band_line(const RunCategory& category);

} // namespace trident::simulator
