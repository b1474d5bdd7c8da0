// `trident validate`: load a job (model, cluster, training, plan) from presets, files and
// flags, check every rule, and print what it derives: parameter counts, micro-batches, rank
// placement and process groups.
#include "command.h"
#include "format.h"
#include "job_options.h"
#include "memory_fit.h"
#include "profile_choice.h"
#include "trident/core/atomic_file.h"
#include "trident/core/parameter_count.h"
#include "trident/core/rank_grid.h"
#include "trident/core/schedule.h"
#include "trident/core/spec_error.h"

#include <iostream>
#include <memory>

namespace trident::cli {
namespace {

using namespace core;

struct ValidateOptions {
    JobInputs inputs;
    bool json = false;
    bool groups = false;
    std::optional<std::int64_t> rank;
    std::string out;
    std::string profile;
    bool allow_oom = false;
};

void print_model(const ModelSpec& m, std::int64_t tp) {
    const ParameterCounts c = count_parameters(m);
    std::cout << "model     " << m.name << (m.source.empty() ? "" : "  [" + m.source + "]") << "\n"
              << "  layers " << m.num_layers << ", hidden " << m.hidden_size << ", heads "
              << m.num_attention_heads << " (kv " << m.num_query_groups << ", head_dim "
              << m.head_dim << "), ffn " << m.ffn_hidden_size << ", vocab " << m.vocab_size
              << " (padded " << m.padded_vocab_size(tp) << " at tp " << tp << "), positions "
              << m.max_position_embeddings << "\n"
              << "  " << to_string(m.activation) << ", " << to_string(m.normalization) << ", "
              << to_string(m.position_embedding) << " positions, "
              << (m.tied_embeddings ? "tied" : "untied") << " embeddings, "
              << (m.linear_bias ? "with" : "no") << " linear biases; params "
              << to_string(m.precision.params) << ", grads " << to_string(m.precision.grads)
              << ", optimizer state " << to_string(m.precision.optimizer_state) << "\n";
    if (m.mla)
        std::cout << "  multi-head latent attention: q_lora_rank " << m.mla->q_lora_rank
                  << ", kv_lora_rank " << m.mla->kv_lora_rank << ", qk " << m.mla->qk_head_dim
                  << "+" << m.mla->qk_pos_emb_head_dim << ", v " << m.mla->v_head_dim << "\n";
    if (m.moe) {
        const MoeSpec& e = *m.moe;
        std::cout << "  MoE: " << e.num_experts << " experts, top-" << e.top_k << ", expert ffn "
                  << e.expert_ffn_hidden_size << ", shared ffn " << e.shared_expert_ffn_hidden_size
                  << ", " << m.num_moe_layers() << " MoE layers (first " << e.first_dense_layers
                  << " dense, every " << e.layer_frequency << "), capacity "
                  << (e.capacity_factor ? std::to_string(*e.capacity_factor) : "dropless") << "\n";
    }
    std::cout << "  parameters " << with_commas(c.total()) << " (" << short_count(double(c.total()))
              << "), active per token " << with_commas(c.active()) << " ("
              << short_count(double(c.active())) << ")\n"
              << "    embedding " << with_commas(c.word_embedding) << " | positions "
              << with_commas(c.position_embedding) << " | layers " << with_commas(c.layers_total)
              << " | final norm " << with_commas(c.final_norm) << " | output "
              << (m.tied_embeddings ? std::string("tied") : with_commas(c.output_layer)) << "\n";
}

void print_plan(const JobSpec& job) {
    const ParallelPlan& p = job.plan;
    const ClusterSpec& c = job.cluster;
    std::cout << "cluster   " << c.name << ": " << count_of(c.nodes, "node", "nodes") << " × "
              << c.devices_per_node << " = " << c.devices() << " devices (" << c.device << "; "
              << c.intra_node_fabric << " within a node, " << c.inter_node_fabric
              << " between nodes)\n";
    std::cout << "training  global batch " << job.training.global_batch_size << " × seq "
              << job.training.seq_length << " = " << with_commas(job.training.tokens_per_step())
              << " tokens/step, " << count_of(job.training.train_iters, "iteration", "iterations")
              << "\n";
    std::cout << "plan      tp " << p.tp << " · cp " << p.cp << " · dp " << p.dp << " · pp " << p.pp
              << " = " << p.devices() << " devices; ep " << p.ep
              << (p.etp ? " · etp " + std::to_string(*p.etp) : "") << " (expert dp "
              << p.expert_dp() << "), vpp " << p.vpp << "; rank order " << p.rank_order << "\n"
              << "  micro-batch " << p.micro_batch_size << " → "
              << count_of(job.micro_batches_per_step(), "micro-batch", "micro-batches")
              << " per step; layers per virtual stage: " << layout_text(job.pipeline_split())
              << "\n"
              << "  schedule " << to_string(p.schedule) << "; "
              << describe_features(p, job.max_layers_per_chunk()) << "\n";
    const RankGrid grid(p);
    std::cout << "  groups (size, nodes spanned):";
    for (std::size_t k = 0; k < kGroupKindNames.size(); ++k) {
        const auto kind = static_cast<GroupKind>(k);
        std::cout << (k ? ", " : " ") << kGroupKindNames[k] << " " << grid.group_of(kind, 0).size()
                  << "/" << grid.nodes_spanned(kind, 0, c.devices_per_node);
    }
    std::cout << "\n";
}

void print_rank(const JobSpec& job, std::int64_t rank) {
    const RankGrid grid(job.plan);
    const RankCoord c = grid.coord(rank);
    std::cout << "rank " << rank << " (node " << rank / job.cluster.devices_per_node << "): tp "
              << c.tp << ", cp " << c.cp << ", ep " << c.ep << ", dp " << c.dp << ", pp " << c.pp
              << " (expert tp " << c.etp << ", expert dp " << c.edp << ")\n";
    for (std::size_t k = 0; k < kGroupKindNames.size(); ++k) {
        std::cout << "  " << kGroupKindNames[k] << ":";
        for (auto r : grid.group_of(static_cast<GroupKind>(k), rank)) std::cout << " " << r;
        std::cout << "\n";
    }
}

void print_groups(const JobSpec& job) {
    constexpr std::size_t kMaxShown = 16;
    const RankGrid grid(job.plan);
    for (std::size_t k = 0; k < kGroupKindNames.size(); ++k) {
        const auto all = grid.groups(static_cast<GroupKind>(k));
        std::cout << kGroupKindNames[k] << " groups (" << all.size() << "):\n";
        for (std::size_t g = 0; g < all.size() && g < kMaxShown; ++g) {
            std::cout << "  [";
            for (std::size_t i = 0; i < all[g].size(); ++i) {
                if (i == kMaxShown) {
                    std::cout << " … " << all[g].size() - kMaxShown << " more";
                    break;
                }
                std::cout << (i ? " " : "") << all[g][i];
            }
            std::cout << "]\n";
        }
        if (all.size() > kMaxShown) std::cout << "  … " << all.size() - kMaxShown << " more\n";
    }
}

// The simulator's memory per stage against the device: a layout that cannot run is not valid
// (exit 3 unless --allow-oom). Returns the line to print. Without a device profile (a cluster
// file naming a device Trident has none for) the memory goes unchecked, and the line says so.
std::string check_memory(const JobSpec& job, const std::string& profile_reference, bool allow_oom) {
    std::optional<core::Profile> profile;
    try {
        profile = core::Profile::from_json(choose_profile(profile_reference, job).json, "profile");
    } catch (const core::SpecError& e) {
        if (!profile_reference.empty()) throw;
        return "memory    not checked: no device profile (" + e.field() + ": " + e.reason() + ")";
    }
    // Memory needs no timing tables (a CPU-sized model on a GPU profile has none for fp32).
    const core::ParallelPlan& p = job.plan;
    const core::Schedule schedule =
        core::make_schedule(p.schedule, std::int32_t(p.pp), std::int32_t(p.vpp),
                            std::int32_t(job.micro_batches_per_step()));
    const auto stages = simulator::memory_per_stage(job, schedule);
    const double capacity = profile->memory_bytes();
    if (!allow_oom) require_fits(stages, capacity);
    double peak = 0.0;
    for (const auto& s : stages) peak = std::max(peak, s.total_bytes());
    const core::Unit unit = core::byte_unit(capacity);
    char line[256];
    std::snprintf(line, sizeof line,
                  "memory    busiest stage %.1f of %.1f %s (%.0f %%, profile %s)%s",
                  peak / unit.scale, capacity / unit.scale, unit.name, 100.0 * peak / capacity,
                  profile->name().c_str(), peak > capacity ? "  OUT OF MEMORY (--allow-oom)" : "");
    return line;
}

} // namespace

Command add_validate_command(CLI::App& app) {
    auto options = std::make_shared<ValidateOptions>();
    Command c;
    c.app = app.add_subcommand("validate", "Check a model/cluster/plan and print what it implies");
    add_job_options(*c.app, options->inputs);
    c.app->add_flag("--json", options->json, "Print the resolved job as a trident.plan/1 file");
    c.app->add_flag("--groups", options->groups, "List the member ranks of every process group");
    c.app->add_option_function<std::int64_t>(
        "--rank", [options](const std::int64_t& r) { options->rank = r; },
        "Print one rank's coordinates and groups");
    c.app->add_option("--out", options->out, "Write the resolved job (a plan file) here");
    c.app->add_option("--profile", options->profile,
                      "Device profile for the memory check (default: as simulate chooses)");
    c.app->add_flag("--allow-oom", options->allow_oom,
                    "Say `valid` for a layout that does not fit in device memory (without it: "
                    "one line, exit 3)");
    c.run = [options] {
        const JobSpec job = load_job(options->inputs);
        if (options->rank) RankGrid(job.plan).coord(*options->rank); // range check first
        // Before anything is written: a layout that does not fit is refused.
        const std::string memory = check_memory(job, options->profile, options->allow_oom);
        const std::string text = to_json(job).dump(2) + "\n";
        if (!options->out.empty()) write_file_atomically(options->out, text, "--out");
        if (options->json) {
            std::cout << text;
            return 0;
        }
        print_model(job.model, job.plan.tp);
        print_plan(job);
        if (options->rank) print_rank(job, *options->rank);
        if (options->groups) print_groups(job);
        std::cout << memory << "\nvalid\n";
        return 0;
    };
    return c;
}

} // namespace trident::cli
