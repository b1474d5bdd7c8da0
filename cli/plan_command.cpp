// `trident plan`: search the layouts of a model on a cluster for the fastest that fits.
#include "command.h"
#include "format.h"
#include "job_options.h"
#include "memory_fit.h"
#include "plan_output.h"
#include "plan_sizes.h"
#include "profile_choice.h"
#include "train_budget.h"
#include "trident/core/atomic_file.h"
#include "trident/core/integer_list.h"
#include "trident/core/job_loader.h"
#include "trident/core/pipeline_split.h"
#include "trident/core/profile.h"
#include "trident/core/spec_error.h"
#include "trident/core/units.h"
#include "trident/data/gpt_dataset.h"
#include "trident/data/indexed_dataset.h"
#include "trident/planner/memory_budget.h"
#include "trident/planner/planner.h"
#include "trident/simulator/accuracy.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <unistd.h>

namespace trident::cli {

namespace {

struct PlanCommandOptions {
    core::JobInputs inputs;
    std::string profile;
    std::string tp, pp, cp, ep, etp, vpp, mbs, schedule, token_dispatcher;
    std::optional<bool> sequence_parallel, distributed_optimizer, tp_comm_overlap;
    std::optional<bool> overlap_moe_comm, shared_expert_overlap;
    std::string recompute = "auto", recompute_method = "block";
    std::optional<std::int64_t> recompute_num_layers;
    std::vector<std::string> recompute_modules;
    bool allow_cross_node_tp = false, no_overlap = false, no_flash_attention = false;
    bool no_overlap_p2p = false, no_memory_savers = false;
    std::string memory_budget;
    std::size_t top = 10;
    bool csv = false, json = false, megatron_args = false, explain = false, exhaustive = false;
    bool tp_pp_map = false;
    std::string launcher; // with --megatron-args: torchrun or srun in front
    std::string out;
    std::string data_path, split; // recorded in the plan file for `trident run --plan`
    TrainBudget budget;
    std::string objective = "step-time";
    std::string nodes; // --nodes: one size, or a list of sizes to compare
};

// The sharding flags pin the strategy (and its replicas, implementation and prefetch depth),
// read by the plan parser's rules — with a pinned distributed optimizer — so a contradiction
// or a bad value reads as it would in a plan file and `simulate` agrees with `plan`.
// --use-megatron-fsdp alone names the implementation and pins no strategy.
void pin_sharding(const PlanCommandOptions& o, planner::SearchSpace& s) {
    const core::JobInputs& in = o.inputs;
    core::Json parallel = core::Json::object();
    core::apply_sharding_overrides(in, parallel);
    if (parallel.empty()) return;
    if (o.distributed_optimizer) parallel["distributed_optimizer"] = *o.distributed_optimizer;
    core::ParallelPlan p;
    core::ObjectReader reader(parallel, "parallel");
    p.distributed_optimizer = reader.boolean_or("distributed_optimizer", false);
    core::read_sharding(reader, p);
    reader.finish();
    if (in.data_parallel_sharding_strategy || in.use_torch_fsdp2)
        s.sharding = {static_cast<core::DataSharding>(p.zero_stage())};
    if (in.optimizer_instances) s.optimizer_instances = p.sharding.instances;
    s.fsdp = p.sharding.implementation;
    s.fsdp_prefetch_units = p.sharding.prefetch_units;
}

planner::SearchSpace search_space(const PlanCommandOptions& o) {
    planner::SearchSpace s;
    s.tp = core::parse_integer_list(o.tp, "--tp");
    s.pp = core::parse_integer_list(o.pp, "--pp");
    s.cp = core::parse_integer_list(o.cp, "--cp");
    s.ep = core::parse_integer_list(o.ep, "--ep");
    s.etp = core::parse_integer_list(o.etp, "--etp");
    s.vpp = core::parse_integer_list(o.vpp, "--vpp");
    s.micro_batch = core::parse_integer_list(o.mbs, "--mbs");
    if (!o.schedule.empty()) {
        std::size_t start = 0;
        while (start <= o.schedule.size()) {
            const std::size_t comma = std::min(o.schedule.find(',', start), o.schedule.size());
            s.schedules.push_back(static_cast<core::ScheduleKind>(core::enum_index(
                o.schedule.substr(start, comma - start), core::kScheduleNames, "--schedule")));
            start = comma + 1;
        }
    }
    if (!o.token_dispatcher.empty())
        s.token_dispatcher = static_cast<core::TokenDispatcher>(core::enum_index(
            o.token_dispatcher, core::kTokenDispatcherNames, "--moe-token-dispatcher-type"));
    if (o.sequence_parallel) s.sequence_parallel = {*o.sequence_parallel};
    if (o.distributed_optimizer) s.distributed_optimizer = {*o.distributed_optimizer};
    if (o.recompute != "auto") {
        core::Recompute r;
        r.granularity = static_cast<core::RecomputeGranularity>(
            core::enum_index(o.recompute, core::kRecomputeGranularityNames, "--recompute"));
        r.method = static_cast<core::RecomputeMethod>(core::enum_index(
            o.recompute_method, core::kRecomputeMethodNames, "--recompute-method"));
        r.num_layers = o.recompute_num_layers.value_or(0);
        s.recompute = r;
    } else if (o.recompute_num_layers) {
        throw core::SpecError("--recompute-num-layers",
                              "needs --recompute full (auto picks the layers itself)");
    }
    if (!o.recompute_modules.empty()) { // selective with these modules
        if (s.recompute && s.recompute->granularity != core::RecomputeGranularity::selective)
            throw core::SpecError("--recompute-modules",
                                  "apply only to --recompute selective (got --recompute " +
                                      o.recompute + ")");
        core::Recompute r;
        r.granularity = core::RecomputeGranularity::selective;
        r.modules = core::recompute_modules_from_json(core::Json(o.recompute_modules),
                                                      "--recompute-modules");
        s.recompute = r;
    }
    // MoE capacity factors to search: a list here (one value is the model override itself).
    if (const auto& list = o.inputs.moe_expert_capacity_factor;
        list && list->find(',') != std::string::npos) {
        std::size_t start = 0;
        while (start <= list->size()) {
            const std::size_t comma = std::min(list->find(',', start), list->size());
            s.capacity_factors.push_back(core::parse_capacity_factor(
                list->substr(start, comma - start), "--moe-expert-capacity-factor"));
            start = comma + 1;
        }
    }
    // Pins of the pipeline split (the job options' flags, read into o.inputs).
    const core::JobInputs& in = o.inputs;
    if (in.pipeline_layout)
        s.pipeline_layout = core::parse_pipeline_layout(*in.pipeline_layout, "--pipeline-layout");
    s.first_stage_layers = in.first_stage_layers;
    s.last_stage_layers = in.last_stage_layers;
    s.account_for_embedding = in.account_for_embedding.value_or(false);
    s.account_for_loss = in.account_for_loss.value_or(false);
    if (const auto fp8 = core::fp8_override(in)) s.precisions = {*fp8};
    s.memory_savers = !o.no_memory_savers;
    s.optimizer_dtype_pinned =
        in.exp_avg_dtype || in.exp_avg_sq_dtype || in.use_precision_aware_optimizer.has_value();
    pin_sharding(o, s);
    s.allow_cross_node_tp = o.allow_cross_node_tp;
    s.overlap = !o.no_overlap;
    s.tp_comm_overlap = o.tp_comm_overlap;
    s.overlap_p2p_comm = !o.no_overlap_p2p;
    s.overlap_moe_expert_parallel_comm = o.overlap_moe_comm;
    s.moe_shared_expert_overlap = o.shared_expert_overlap;
    s.flash_attention = !o.no_flash_attention;
    return s;
}

} // namespace

namespace {

// What the planner may choose from: each dimension a value, a list or a range; pins.
void add_search_options(CLI::App* app, const std::shared_ptr<PlanCommandOptions>& o) {
    const std::string search = "Search (a value, a list 2,4,8 or a range 1-8; default: all)";
    app->add_option("--tp,--tensor-model-parallel-size", o->tp, "Tensor-parallel degrees")
        ->group(search);
    app->add_option("--pp,--pipeline-model-parallel-size", o->pp, "Pipeline-parallel degrees")
        ->group(search);
    app->add_option("--cp,--context-parallel-size", o->cp, "Context-parallel degrees")
        ->group(search);
    app->add_option("--ep,--expert-model-parallel-size", o->ep, "Expert-parallel degrees")
        ->group(search);
    app->add_option("--etp,--expert-tensor-parallel-size", o->etp,
                    "Expert tensor-parallel degrees (default: tp, and 1 where tp > 1)")
        ->group(search);
    app->add_option("--vpp,--virtual-pipeline-model-parallel-size", o->vpp,
                    "Virtual stages per pipeline rank")
        ->group(search);
    app->add_option("--mbs,--micro-batch-size", o->mbs, "Micro-batch sizes")->group(search);
    app->add_option("--moe-token-dispatcher-type", o->token_dispatcher,
                    "MoE token dispatcher: allgather | alltoall (default) | flex (DeepEP)")
        ->group(search);
    app->add_option(
           "--schedule", o->schedule,
           "Schedules: gpipe,1f1b,interleaved-1f1b,zero-bubble-h1,zero-bubble-v,dualpipe,dualpipev")
        ->group(search);
    app->add_flag_function(
           "--sequence-parallel,!--no-sequence-parallel",
           [o](std::int64_t n) { o->sequence_parallel = n > 0; }, "Pin sequence parallelism on/off")
        ->group(search);
    app->add_flag_function(
           "--distributed-optimizer,--use-distributed-optimizer,!--no-distributed-optimizer",
           [o](std::int64_t n) { o->distributed_optimizer = n > 0; }, "Pin ZeRO-1 on/off")
        ->group(search);
    app->add_option("--recompute,--recompute-granularity", o->recompute,
                    "auto (default: cheapest that fits) | none | selective | full")
        ->group(search);
    app->add_option("--recompute-method", o->recompute_method,
                    "block | uniform (with --recompute full)")
        ->group(search);
    app->add_option_function<std::int64_t>(
           "--recompute-num-layers", [o](const std::int64_t& v) { o->recompute_num_layers = v; },
           "Layers per chunk (with --recompute full)")
        ->group(search);
    app->add_option("--recompute-modules", o->recompute_modules,
                    "Pin selective recomputation of these modules (core_attn moe_act layernorm "
                    "mla_up_proj mlp moe shared_experts)")
        ->expected(1, -1)
        ->delimiter(',')
        ->group(search);
    app->add_flag("--allow-cross-node-tp", o->allow_cross_node_tp, "Let tensor groups span nodes")
        ->group(search);
    app->add_flag_function(
           "--tp-comm-overlap,!--no-tp-comm-overlap",
           [o](std::int64_t n) { o->tp_comm_overlap = n > 0; },
           "Pin tensor-parallel communication overlap on/off (with sequence parallelism)")
        ->group(search);
    app->add_flag_function(
           "--overlap-moe-expert-parallel-comm,!--no-overlap-moe-expert-parallel-comm",
           [o](std::int64_t n) { o->overlap_moe_comm = n > 0; },
           "Pin the MoE all-to-all overlap on/off (default: on where Megatron-Core runs it — "
           "ep > 1, alltoall or flex, virtual stages at pp > 1 — unless --no-overlap)")
        ->group(search);
    app->add_flag_function(
           "--moe-shared-expert-overlap,!--no-moe-shared-expert-overlap",
           [o](std::int64_t n) { o->shared_expert_overlap = n > 0; },
           "Pin the shared experts beside the MoE exchange on/off (default: on for models with "
           "shared experts where the all-to-all overlap is off, unless --no-overlap)")
        ->group(search);
    app->add_flag("--no-overlap-p2p-communication", o->no_overlap_p2p,
                  "Pipeline sends wait, as Megatron without overlap_p2p_comm (interleaved only)")
        ->group(search);
    app->add_flag("--no-memory-savers", o->no_memory_savers,
                  "Do not try the FP8/NVFP4 parameter gather or BF16 Adam moments before "
                  "recomputation or more sharding")
        ->group(search);
    app->add_flag("--no-overlap", o->no_overlap,
                  "Do not overlap gradient reduction / parameter gather")
        ->group(search);
    app->add_flag("--no-flash-attention", o->no_flash_attention,
                  "Model attention without flash kernels")
        ->group(search);
}

// The budget, how much to show and where the result goes.
void add_output_options(CLI::App* app, const std::shared_ptr<PlanCommandOptions>& o) {
    app->add_option(
        "--memory-budget", o->memory_budget,
        "Per-device budget: 70GiB, 80GB, 0.9 or 90% (default 100% of the device: reserve, "
        "context and NCCL buffers are counted)");
    app->add_option("--top", o->top, "How many layouts to list (default 10)")
        ->check(CLI::Range(1, 1000));
    app->add_flag("--csv", o->csv, "Print the table as CSV");
    app->add_flag("--json", o->json, "Print the result as JSON");
    app->add_option("--out", o->out, "Write the best layout as a plan file (for simulate / run)");
    app->add_option("--data-path", o->data_path,
                    "With --out: the indexed dataset (prefix P of P.bin + P.idx) the plan's run "
                    "trains on, recorded in the plan file");
    app->add_option("--split", o->split,
                    "With --out: train,validation[,test] weights over the dataset's documents");
    app->add_flag("--megatron-args", o->megatron_args,
                  "Print the best layout as Megatron-LM arguments, alone on stdout (the table "
                  "goes to stderr), so `> args.sh` captures them");
    app->add_option("--launcher", o->launcher,
                    "With --megatron-args: put the launcher's command line in front")
        ->check(CLI::IsMember({"torchrun", "srun"}));
    app->add_flag("--explain", o->explain,
                  "Count rejections by reason and show the closest misses");
    app->add_flag("--exhaustive", o->exhaustive, "Simulate every feasible layout (no pruning)");
    app->add_flag("--tp-pp-map", o->tp_pp_map,
                  "Also search each (tp, pp) pair and print its best tokens/s per device as a "
                  "grid (one search per pair)");
    app->add_option("--objective", o->objective,
                    "What ranks layouts (and --nodes sizes): step-time, or with --train-tokens "
                    "time-to-train (expected wall time with failures and saves) or cost "
                    "(GPU-hours)")
        ->capture_default_str();
}

// The human-readable result: what was searched, the ranking, and what was asked on top.
void print_result(const PlanCommandOptions& opts, const core::JobSpec& specs,
                  const core::Profile& profile, const planner::PlanResult& r, double budget,
                  const SegmentTimer& timer) {
    const PlanCommandOptions* o = &opts;
    // With --megatron-args stdout holds the arguments alone: everything else goes to stderr.
    std::ostream& human = o->megatron_args ? std::cerr : std::cout;
    char line[512];
    std::snprintf(
        line, sizeof line, "%s on %lld × %s, global batch %lld × %lld tokens, budget %s of %s\n",
        specs.model.name.c_str(), (long long)specs.cluster.devices(), profile.name().c_str(),
        (long long)specs.training.global_batch_size, (long long)specs.training.seq_length,
        core::bytes_text(budget).c_str(), core::bytes_text(profile.memory_bytes()).c_str());
    human << line;
    std::snprintf(
        line, sizeof line,
        "searched %s layouts in %.2f s (%s layouts/s): %s fit, %s simulated in full%s\n\n",
        with_commas(r.layouts).c_str(), r.seconds,
        with_commas(std::int64_t(double(r.layouts) / std::max(r.seconds, 1e-9))).c_str(),
        with_commas(r.feasible).c_str(), with_commas(r.simulated).c_str(),
        r.cancelled ? " (cancelled)" : "");
    human << line << std::flush;
    print_table(r, budget, human);
    // How far to trust the figures: the published runs of #1's kind (trident accuracy).
    human << simulator::error_band_line(simulator::category_of(r.best.front().job, profile))
          << "\n";
    if (o->explain) print_explain(r, human);
    if (const auto run =
            time_to_train(o->budget, r.best.front().job, r.best.front().step_time_s, timer))
        human << "\ntime to train, best layout: " << simulator::time_to_train_text(*run) << "\n";
    if (o->megatron_args) std::cout << planner::megatron_arguments(r.best.front().job, o->launcher);
    if (!o->out.empty()) human << "\nwrote the best layout to " << o->out << "\n";
}

// The data recorded in the plan file: checked now (a typo found at submission is an hour lost
// in a queue), kept as an absolute prefix so the run finds it from any folder.
void record_data(const PlanCommandOptions& o, core::JobSpec& specs) {
    if (!o.split.empty() && o.data_path.empty() && specs.data_path.empty())
        throw core::SpecError("--split", "goes with --data-path (it splits that dataset)");
    if (!o.data_path.empty() && o.out.empty())
        throw core::SpecError("--data-path", "goes with --out (it is recorded in the plan file)");
    if (!o.data_path.empty()) {
        data::IndexedDataset check(o.data_path, "--data-path");
        specs.data_path = std::filesystem::absolute(data::dataset_prefix(o.data_path)).string();
    }
    if (!o.split.empty()) {
        data::parse_split(o.split);
        specs.data_split = o.split;
    }
}

// A plan file whose run would train one step of synthetic data says so, loudly: that is what
// `trident run --plan` does with it unless given --train-iters and --data-path.
void warn_about_plan_file(const PlanCommandOptions& o, const core::JobSpec& job) {
    if (o.out.empty()) return;
    const bool one_step = job.training.train_iters == 1, synthetic = job.data_path.empty();
    if (!one_step && !synthetic) return;
    std::string what = one_step
                           ? "trains 1 iteration"
                           : "trains " + std::to_string(job.training.train_iters) + " iterations";
    what += synthetic ? " of synthetic sequences" : " of " + job.data_path;
    std::string fix;
    if (one_step) fix += "--train-iters N";
    if (synthetic) fix += std::string(fix.empty() ? "" : " and ") + "--data-path PREFIX";
    std::fprintf(stderr,
                 "trident: warning: --out: %s runs as written: it %s (give `trident plan` %s, "
                 "or pass %s to `trident run`)\n",
                 o.out.c_str(), what.c_str(), fix.c_str(), one_step && synthetic ? "them" : "it");
}

// A ramp-up runs on one layout: of the planner's best, keep those that take every batch of
// the ramp (Megatron requires each to divide into micro-batches over dp); none: the first
// one's refusal.
void keep_ramp_layouts(const PlanCommandOptions& o, std::vector<planner::Candidate>& best) {
    if (o.budget.rampup.empty() || best.empty()) return;
    const auto checked = check_train_budget(o.budget, best.front().job);
    if (!checked) return;
    const auto segments = run_segments(o.budget, checked->second, checked->first);
    std::optional<core::SpecError> first;
    std::erase_if(best, [&](const planner::Candidate& c) {
        for (const simulator::RunSegment& segment : segments) {
            core::JobSpec at = c.job;
            at.training.global_batch_size = segment.global_batch_size;
            try {
                core::validate(at);
            } catch (const core::SpecError& e) {
                if (!first)
                    first = core::SpecError("--rampup-batch-size",
                                            "no layout found takes every batch of the ramp; #1 (" +
                                                layout_cell(c.job.plan) + ") at batch " +
                                                std::to_string(segment.global_batch_size) + ": " +
                                                e.what());
                return true;
            }
        }
        return false;
    });
    if (best.empty()) throw *first;
}

// One cluster size searched: the specs (with `nodes` when given), the profile, the memory
// budget and the planner's result, its best layouts ranked by the objective.
struct SizeSearch {
    core::JobSpec specs;
    core::Profile profile;
    double budget = 0.0;
    planner::PlanResult result;
    SegmentTimer timer; // the run's other segments (ramp-up, sequence schedule)
};

// Times a segment of the run for `plan`: a ramp's smaller batch on the candidate's own layout;
// a schedule's other sequence length on the layout re-planned for it (once per size and
// length, whichever candidate asks).
SegmentTimer plan_segment_timer(const PlanCommandOptions& o, const planner::SearchSpace& space,
                                const core::JobSpec& specs, const core::Profile& profile,
                                double budget) {
    auto shared =
        std::make_shared<const std::tuple<planner::SearchSpace, core::JobSpec, core::Profile>>(
            space, specs, profile);
    auto replans =
        std::make_shared<std::map<std::array<std::int64_t, 3>, simulator::SegmentTime>>();
    const bool replan = !o.budget.sequence_schedule.empty();
    return [shared, replans, replan, budget](const core::JobSpec& job) {
        const auto& [space, specs, profile] = *shared;
        simulator::SegmentTime s;
        if (!replan) {
            s = time_on_own_layout(job, profile, /*allow_oom=*/false);
            s.layout = "layout kept";
            return s;
        }
        const std::array<std::int64_t, 3> key = {job.cluster.nodes, job.training.global_batch_size,
                                                 job.training.seq_length};
        if (const auto it = replans->find(key); it != replans->end()) return it->second;
        core::JobSpec at = specs;
        at.cluster = job.cluster;
        at.training.global_batch_size = key[1];
        at.training.seq_length = key[2];
        planner::PlanOptions options;
        options.memory_budget_bytes = budget;
        options.top_k = 1;
        const planner::PlanResult r = planner::plan(at, profile, space, options);
        if (r.best.empty()) throw planner::why_no_candidate(at, r, budget, "--memory-budget");
        s.step_time_s = r.best.front().step_time_s;
        s.layout = "re-planned: " + layout_cell(r.best.front().job.plan);
        return replans->emplace(key, s).first->second;
    };
}

SizeSearch search_size(const PlanCommandOptions& o, const planner::SearchSpace& space,
                       std::optional<std::int64_t> nodes, Objective objective) {
    core::JobInputs inputs = o.inputs;
    inputs.nodes = nodes;
    if (!space.capacity_factors.empty()) {
        // The search sets each factor in turn; the specs take a listed number where there is
        // one, so a padding request (which needs a factor) survives loading.
        const auto number =
            std::find_if(space.capacity_factors.begin(), space.capacity_factors.end(),
                         [](const std::optional<double>& f) { return bool(f); });
        inputs.moe_expert_capacity_factor =
            number == space.capacity_factors.end() ? "none" : exact_number(**number);
    }
    // A pinned FP8/NVFP4 parameter gather needs the distributed optimizer (Megatron's rule):
    // the layouts the search tries carry it, and so do the specs it starts from — unless
    // --distributed-optimizer pins it off, which the loader then refuses by name.
    if ((inputs.fp8_param_gather.value_or(false) || inputs.fp4_param_gather.value_or(false)) &&
        !inputs.distributed_optimizer)
        inputs.distributed_optimizer = o.distributed_optimizer.value_or(true);
    core::JobSpec specs = core::load_specs(inputs);
    record_data(o, specs);
    (void)check_train_budget(o.budget, specs); // a malformed budget fails before the search
    const core::ProfileChoice choice = choose_profile(o.profile, specs);
    core::Profile profile = core::Profile::from_json(choice.json, "profile");
    specs.profile = choice.reference; // the plan file records the profile it was made with
    const double budget = planner::parse_memory_budget(
        o.memory_budget.empty() ? std::string(planner::kDefaultMemoryBudget) : o.memory_budget,
        profile.memory_bytes(), "--memory-budget");
    planner::PlanOptions options;
    options.memory_budget_bytes = budget;
    // A ramp keeps only the layouts that divide every ramp batch: search wider, then trim.
    options.top_k = o.budget.rampup.empty() ? o.top : std::max<std::size_t>(o.top, 200);
    options.exhaustive = o.exhaustive;
    auto bar = std::make_shared<ProgressBar>();
    options.on_progress = [bar](const planner::Progress& p) { (*bar)(p); };
    planner::PlanResult r = planner::plan(specs, profile, space, options);
    keep_ramp_layouts(o, r.best);
    if (r.best.size() > o.top) r.best.resize(o.top);
    SegmentTimer timer = plan_segment_timer(o, space, specs, profile, budget);
    rank_by_objective(r.best, objective, o.budget, timer);
    return {std::move(specs), std::move(profile), budget, std::move(r), std::move(timer)};
}

void write_plan_file(const PlanCommandOptions& o, const planner::Candidate& best, double budget) {
    if (o.out.empty()) return;
    core::write_file_atomically(o.out, planner::plan_file(best, budget).dump(2) + "\n", "--out");
    warn_about_plan_file(o, best.job);
}

int plan_one_size(const PlanCommandOptions& o, const planner::SearchSpace& space,
                  std::optional<std::int64_t> nodes, Objective objective) {
    const SizeSearch s = search_size(o, space, nodes, objective);
    const planner::PlanResult& r = s.result;
    if (r.best.empty()) throw planner::why_no_candidate(s.specs, r, s.budget, "--memory-budget");
    write_plan_file(o, r.best.front(), s.budget);
    std::vector<planner::TpPpCell> map;
    if (o.tp_pp_map) {
        planner::PlanOptions options;
        options.memory_budget_bytes = s.budget;
        map = planner::best_per_tp_pp(s.specs, s.profile, space, options);
    }
    if (o.json) {
        core::Json j = result_json(r, s.budget);
        if (o.tp_pp_map) j["tp_pp_map"] = tp_pp_map_json(map);
        if (const auto run =
                time_to_train(o.budget, r.best.front().job, r.best.front().step_time_s, s.timer))
            j["time_to_train"] = simulator::to_json(*run);
        std::cout << j.dump(2) << "\n";
    } else if (o.csv) {
        print_csv(r, std::cout);
    } else {
        print_result(o, s.specs, s.profile, r, s.budget, s.timer);
        if (o.tp_pp_map) print_tp_pp_map(map, s.specs.cluster.devices(), std::cout);
    }
    return 0;
}

// `--nodes 64,128,256`: the best layout of each size side by side, the best size by the
// objective written with --out.
int plan_sizes(const PlanCommandOptions& o, const planner::SearchSpace& space,
               const std::vector<std::int64_t>& nodes, Objective objective) {
    for (const auto& [flag, asked] : {std::pair{"--csv", o.csv},
                                      {"--megatron-args", o.megatron_args},
                                      {"--explain", o.explain},
                                      {"--tp-pp-map", o.tp_pp_map}})
        if (asked)
            throw core::SpecError(flag, "goes with one cluster size, not a --nodes list (plan the "
                                        "size you chose with it)");
    std::vector<SizeResult> sizes;
    double budget = 0.0;
    SegmentTimer timer; // any size's: it takes the size from the job it times
    for (const std::int64_t n : nodes) {
        SizeSearch s = search_size(o, space, n, objective);
        budget = s.budget;
        timer = s.timer;
        SizeResult row;
        row.nodes = n;
        row.devices = s.specs.cluster.devices();
        if (s.result.best.empty())
            row.none_reason =
                planner::why_no_candidate(s.specs, s.result, s.budget, "--memory-budget").what();
        else
            row.best = std::move(s.result.best.front());
        sizes.push_back(std::move(row));
    }
    const std::size_t best = finish_sizes(sizes, objective, o.budget, timer);
    if (best == sizes.size())
        throw core::SpecError("--nodes", "no size in " + o.nodes + " has a layout that fits: " +
                                             sizes.front().none_reason);
    write_plan_file(o, *sizes[best].best, budget);
    if (o.json)
        std::cout << sizes_json(sizes, best, objective, budget).dump(2) << "\n";
    else
        print_sizes(sizes, best, objective, std::cout);
    if (!o.out.empty() && !o.json)
        std::cout << "\nwrote the best size's layout (" << sizes[best].nodes << " nodes) to "
                  << o.out << "\n";
    return 0;
}

} // namespace

Command add_plan_command(CLI::App& app) {
    auto o = std::make_shared<PlanCommandOptions>();
    Command c;
    c.app = app.add_subcommand("plan", "Search the fastest parallel layout that fits in memory");
    add_spec_options(*c.app, o->inputs, &o->nodes);
    c.app->add_option("--profile", o->profile,
                      "Device profile (default: the plan's, then ./DEVICE.json, the user's "
                      "profile folder, the preset of the cluster's device)");
    add_search_options(c.app, o);
    add_split_options(*c.app, o->inputs);
    add_fp8_options(*c.app, o->inputs);
    add_sharding_options(*c.app, o->inputs);
    add_output_options(c.app, o);
    add_train_budget_options(*c.app, o->budget);
    c.run = [o] {
        if (!o->launcher.empty() && !o->megatron_args)
            throw core::SpecError("--launcher", "goes with --megatron-args (it prefixes them)");
        const planner::SearchSpace space = search_space(*o);
        const Objective objective = parse_objective(o->objective, o->budget);
        std::vector<std::int64_t> sizes = core::parse_integer_list(o->nodes, "--nodes");
        std::sort(sizes.begin(), sizes.end()); // smallest first: scaling is against it
        sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
        if (sizes.size() > 1) return plan_sizes(*o, space, sizes, objective);
        return plan_one_size(*o, space, sizes.empty() ? std::nullopt : std::optional(sizes.front()),
                             objective);
    };
    return c;
}

} // namespace trident::cli
