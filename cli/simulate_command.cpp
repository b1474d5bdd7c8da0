// `trident simulate`: predict one training step of a job from a device profile.
#include "command.h"
#include "job_options.h"
#include "profile_choice.h"
#include "trident/core/atomic_file.h"
#include "trident/core/profile.h"
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
    c.run = [options] {
        const core::JobSpec job = core::load_job(options->inputs);
        const core::Profile profile =
            core::Profile::from_json(choose_profile(options->profile, job).json, "profile");
        simulator::SimulateOptions sim;
        sim.trace = !options->trace.empty();
        const simulator::Report report = simulator::simulate(job, profile, sim);
        // Write files before printing, so a failure to write is reported and nothing is half done.
        if (!options->trace.empty()) {
            std::ostringstream text;
            core::write_chrome_trace(report.trace, text);
            core::write_file_atomically(options->trace, text.str(), "--trace");
        }
        if (!options->json.empty())
            core::write_file_atomically(options->json,
                                        simulator::report_json(report).dump(2) + "\n", "--json");
        simulator::print_report(report, std::cout);
        if (options->layer_ops) {
            std::cout << "\n";
            simulator::print_layer_breakdowns(simulator::layer_breakdowns(job, profile), std::cout);
        }
        return 0;
    };
    return c;
}

} // namespace trident::cli
