// `trident simulate`: predict one training step of a job from a device profile.
#include "command.h"
#include "job_options.h"
#include "memory_fit.h"
#include "profile_choice.h"
#include "train_budget.h"
#include "trident/core/atomic_file.h"
#include "trident/core/job.h"
#include "trident/core/profile.h"
#include "trident/simulator/accuracy.h"
#include "trident/simulator/layer_breakdown.h"
#include "trident/simulator/report.h"

#include <iostream>
#include <memory>
#include <sstream>

namespace trident::cli {
namespace {

struct SimulateOptions {
    core::JobInputs inputs;
    std::string profile;
    std::string trace;
    std::string json;
    bool layer_ops = false;
    bool allow_oom = false;
    std::string stages = "auto";
    TrainBudget budget;
};

} // namespace

Command add_simulate_command(CLI::App& app) {
    auto options = std::make_shared<SimulateOptions>();
    Command c;
    c.app = app.add_subcommand("simulate", "Predict one training step: time, MFU, bubbles, memory");
    add_job_options(*c.app, options->inputs);
    c.app->add_option(
        "--profile", options->profile,
        "Device profile preset or trident.profile/1 file (default: the plan's, then "
        "./DEVICE.json, the user's profile folder, the preset of the cluster's device)");
    c.app->add_option("--trace", options->trace,
                      "Write the simulated timeline (Chrome-trace JSON)");
    c.app->add_option("--json", options->json, "Write the report as JSON");
    c.app->add_flag("--layer-ops", options->layer_ops,
                    "Also print every operation of a dense and an MoE layer, the embedding and the "
                    "loss head: shape, time and rate (where a layer's time goes)");
    c.app->add_flag("--allow-oom", options->allow_oom,
                    "Print the report of a layout that does not fit in device memory (without "
                    "it: one line, exit 3)");
    c.app
        ->add_option("--stages", options->stages,
                     "Per-stage rows: all, or summary (identical neighbouring stages as one "
                     "range); default summary beyond 8 stages")
        ->check(CLI::IsMember({"auto", "summary", "all"}))
        ->capture_default_str();
    add_train_budget_options(*c.app, options->budget);
    c.run = [options] {
        const core::JobSpec job = core::load_job(options->inputs);
        (void)check_train_budget(options->budget, job); // a malformed budget fails before work
        const core::Profile profile =
            core::Profile::from_json(choose_profile(options->profile, job).json, "profile");
        simulator::SimulateOptions sim;
        sim.trace = !options->trace.empty();
        const simulator::Report report = simulator::simulate(job, profile, sim);
        if (!options->allow_oom) require_fits(report); // before any file is written
        // A ramp's or a schedule's other segments run on the same layout.
        const auto run = time_to_train(
            options->budget, job, report.step_time_s, [&](const core::JobSpec& segment) {
                return time_on_own_layout(segment, profile, options->allow_oom);
            });
        // Write files before printing, so a failure to write is reported and nothing is half done.
        if (!options->trace.empty()) {
            std::ostringstream text;
            core::write_chrome_trace(report.trace, text);
            core::write_file_atomically(options->trace, text.str(), "--trace");
        }
        if (!options->json.empty()) {
            core::Json j = simulator::report_json(report);
            if (run) j["time_to_train"] = simulator::to_json(*run);
            core::write_file_atomically(options->json, j.dump(2) + "\n", "--json");
        }
        const bool summary =
            options->stages == "summary" || (options->stages == "auto" && report.stages.size() > 8);
        simulator::print_report(
            report, std::cout, summary ? simulator::StageRows::summary : simulator::StageRows::all);
        // How far to trust it: the published runs of the job's kind (trident accuracy).
        std::cout << simulator::error_band_line(simulator::category_of(job, profile)) << "\n";
        if (run) std::cout << "\ntime to train " << simulator::time_to_train_text(*run) << "\n";
        if (options->layer_ops) {
            std::cout << "\n";
            simulator::print_layer_breakdowns(simulator::layer_breakdowns(job, profile), std::cout);
        }
        return 0;
    };
    return c;
}

} // namespace trident::cli
