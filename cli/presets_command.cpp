// `trident presets`: list the shipped model, cluster and plan presets, or print one to copy.
#include "command.h"
#include "format.h"
#include "trident/core/job_loader.h"
#include "trident/core/parameter_count.h"
#include "trident/core/presets.h"
#include "trident/core/spec_error.h"

#include <iomanip>
#include <iostream>
#include <memory>

namespace trident::cli {
namespace {

using core::PresetKind;

struct PresetsOptions {
    std::string kind = "all";
    std::string show;
};

void list_models() {
    std::cout << "models\n";
    std::cout << "  " << std::left << std::setw(24) << "name" << std::right << std::setw(10)
              << "params" << std::setw(10) << "active" << std::setw(8) << "layers" << std::setw(8)
              << "hidden"
              << "  source\n";
    for (const auto& name : core::preset_names(PresetKind::model)) {
        const auto m =
            core::model_from_json(core::resolve_reference(name, PresetKind::model, "model"));
        const auto counts = core::count_parameters(m);
        std::cout << "  " << std::left << std::setw(24) << name << std::right << std::setw(10)
                  << short_count(double(counts.total())) << std::setw(10)
                  << short_count(double(counts.active())) << std::setw(8) << m.num_layers
                  << std::setw(8) << m.hidden_size << "  " << m.source.substr(0, 60) << "\n";
    }
}

void list_clusters() {
    std::cout << "clusters (nodes: any, with --nodes N)\n";
    std::cout << "  " << std::left << std::setw(24) << "name" << std::setw(10) << "per node"
              << std::setw(20) << "device"
              << "fabrics (intra / inter)\n";
    for (const auto& name : core::preset_names(PresetKind::cluster)) {
        const auto c =
            core::cluster_from_json(core::resolve_reference(name, PresetKind::cluster, "cluster"));
        std::cout << "  " << std::left << std::setw(24) << name << std::setw(10)
                  << c.devices_per_node << std::setw(20) << c.device << c.intra_node_fabric << " / "
                  << c.inter_node_fabric << "\n";
    }
}

void list_plans() {
    std::cout << "plans\n";
    std::cout << "  " << std::left << std::setw(28) << "name" << std::setw(20) << "model"
              << std::right << std::setw(8) << "devices"
              << "  tp·cp·dp·pp (ep, vpp)  "
              << "mbs  gbs    schedule\n";
    for (const auto& name : core::preset_names(PresetKind::plan)) {
        core::JobInputs in;
        in.plan = name;
        const auto job = core::load_job(in);
        const auto& p = job.plan;
        std::ostringstream degrees;
        degrees << p.tp << "·" << p.cp << "·" << p.dp << "·" << p.pp << " (" << p.ep << ", "
                << p.vpp << ")";
        std::cout << "  " << std::left << std::setw(28) << name << std::setw(20) << job.model.name
                  << std::right << std::setw(8) << job.cluster.devices() << "  " << std::left
                  << std::setw(26) << degrees.str() << std::setw(5) << p.micro_batch_size
                  << std::setw(7) << job.training.global_batch_size << core::to_string(p.schedule)
                  << "\n";
    }
}

} // namespace

Command add_presets_command(CLI::App& app) {
    auto options = std::make_shared<PresetsOptions>();
    Command c;
    c.app = app.add_subcommand("presets", "List shipped presets, or print one (--show) to copy");
    c.app->add_option("kind", options->kind, "models | clusters | plans | all")
        ->check(CLI::IsMember({"models", "clusters", "plans", "all"}));
    c.app->add_option("--show", options->show, "Print the JSON of the preset with this name");
    c.run = [options] {
        if (!options->show.empty()) {
            for (const auto& p : core::embedded_presets())
                if (p.name == options->show &&
                    (options->kind == "all" || options->kind == p.kind)) {
                    std::cout << p.text;
                    return 0;
                }
            throw core::SpecError("--show", "no preset named '" + options->show + "'");
        }
        const bool all = options->kind == "all";
        if (all || options->kind == "models") list_models();
        if (all) std::cout << "\n";
        if (all || options->kind == "clusters") list_clusters();
        if (all) std::cout << "\n";
        if (all || options->kind == "plans") list_plans();
        return 0;
    };
    return c;
}

} // namespace trident::cli
