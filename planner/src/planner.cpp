#include "trident/planner/planner.h"

#include "layout_checks.h"
#include "trident/core/rank_grid.h"
#include "trident/core/schedule.h"
#include "trident/core/spec_error.h"
#include "trident/core/units.h"
#include "trident/simulator/cost_model.h"
#include "trident/simulator/memory.h"
#include "trident/simulator/moe_overlap.h"
#include "trident/simulator/simulate.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <exception>
#include <optional>
#include <thread>
#include <tuple>

namespace trident::planner {

using core::JobSpec;
using core::ParallelPlan;
using core::Recompute;
using core::RecomputeGranularity;
using core::ScheduleKind;

namespace {

std::vector<std::int64_t> divisors_up_to(std::int64_t n, std::int64_t limit) {
    std::vector<std::int64_t> out;
    for (std::int64_t d = 1; d <= std::min(n, limit); ++d)
        if (n % d == 0) out.push_back(d);
    return out;
}

} // namespace

std::vector<std::int64_t> tensor_parallel_degrees(const JobSpec& specs, const SearchSpace& space) {
    const std::int64_t devices = specs.cluster.devices();
    return !space.tp.empty()
               ? space.tp
               : divisors_up_to(devices, space.allow_cross_node_tp ? devices
                                                                   : specs.cluster.fabric_domain());
}

std::vector<std::int64_t> pipeline_parallel_degrees(const JobSpec& specs,
                                                    const SearchSpace& space) {
    // Stages need not hold equal layer counts (core/pipeline_split.h): any degree that divides
    // the devices, up to one layer per stage.
    return !space.pp.empty() ? space.pp
                             : divisors_up_to(specs.cluster.devices(), specs.model.num_layers);
}

namespace {

// The candidate values of each dimension.
struct Dimensions {
    std::vector<std::int64_t> tp, pp, cp, ep, vpp, mbs;
    std::vector<ScheduleKind> schedules;
};

Dimensions dimensions(const JobSpec& specs, const SearchSpace& space) {
    const std::int64_t devices = specs.cluster.devices();
    Dimensions d;
    d.tp = tensor_parallel_degrees(specs, space);
    d.pp = pipeline_parallel_degrees(specs, space);
    // Context parallelism pays off only for long sequences.
    d.cp = !space.cp.empty()                   ? space.cp
           : specs.training.seq_length >= 8192 ? std::vector<std::int64_t>{1, 2, 4, 8}
                                               : std::vector<std::int64_t>{1};
    d.ep = !space.ep.empty() ? space.ep
           : specs.model.moe ? divisors_up_to(specs.model.moe->num_experts, devices)
                             : std::vector<std::int64_t>{1};
    d.vpp = !space.vpp.empty() ? space.vpp : std::vector<std::int64_t>{1, 2, 3, 4, 6, 8};
    d.mbs =
        !space.micro_batch.empty() ? space.micro_batch : std::vector<std::int64_t>{1, 2, 4, 8, 16};
    d.schedules = !space.schedules.empty()
                      ? space.schedules
                      : std::vector<ScheduleKind>{
                            ScheduleKind::one_f_one_b,    ScheduleKind::interleaved_1f1b,
                            ScheduleKind::zero_bubble_h1, ScheduleKind::gpipe,
                            ScheduleKind::zero_bubble_v,  ScheduleKind::dualpipe,
                            ScheduleKind::dualpipev};
    return d;
}

// The experts' tensor split at tensor-parallel degree tp: the pinned degrees; else the default
// (nullopt: etp = tp) and, for an MoE model under tensor parallelism, whole experts (etp 1)
// spread over the tp ranks too — Megatron-Core's MoE parallel folding (Liu et al. 2025).
std::vector<std::optional<std::int64_t>>
expert_tp_degrees(const JobSpec& specs, const SearchSpace& space, std::int64_t tp) {
    std::vector<std::optional<std::int64_t>> out;
    for (std::int64_t etp : space.etp) out.push_back(etp);
    if (!out.empty()) return out;
    out.push_back(std::nullopt);
    if (specs.model.moe && tp > 1) out.push_back(1);
    return out;
}

// One layout's degrees, as the search's loops pick them.
struct Degrees {
    std::int64_t tp, cp, pp, dp, ep;
    std::optional<std::int64_t> etp;
    std::int64_t vpp;
    ScheduleKind schedule;
    std::int64_t mbs;
    bool sp;
    core::DataSharding sharding;
};

// Virtual stages belong to the interleaved schedule, two chunks to the V-shaped ones and
// DualPipe; without pipelining every schedule is the same: 1F1B stands for them (unless the
// user pinned the schedule). A pinned vpp means Megatron's virtual stages (interleaved).
bool schedule_fits(ScheduleKind schedule, std::int64_t vpp, std::int64_t pp,
                   const SearchSpace& space) {
    if (core::holds_two_chunks(schedule)
            ? vpp != 2
            : (vpp > 1) != (schedule == ScheduleKind::interleaved_1f1b))
        return false;
    if (core::holds_two_chunks(schedule) && space.schedules.empty() && !space.vpp.empty())
        return false;
    return !(pp == 1 && space.schedules.empty() && schedule != ScheduleKind::one_f_one_b);
}

// The plan of one combination, with the search's pinned or default switches.
ParallelPlan layout_of(const Degrees& d, const SearchSpace& space) {
    const bool zero1 = d.sharding >= core::DataSharding::optim;
    ParallelPlan p;
    p.tp = d.tp;
    p.cp = d.cp;
    p.pp = d.pp;
    p.dp = d.dp;
    p.ep = d.ep;
    p.etp = d.etp;
    p.vpp = d.vpp;
    p.schedule = d.schedule;
    p.micro_batch_size = d.mbs;
    p.sequence_parallel = d.sp;
    p.distributed_optimizer = zero1;
    p.sharding.strategy = d.sharding;
    p.sharding.implementation = space.fsdp;
    p.sharding.instances = zero1 ? space.optimizer_instances.value_or(1) : 1;
    p.sharding.prefetch_units = space.fsdp_prefetch_units;
    p.allow_cross_node_tp = space.allow_cross_node_tp;
    p.flash_attention = space.flash_attention;
    // ZeRO-2/3 overlap always (Megatron-FSDP).
    p.overlap_grad_reduce = space.overlap || d.sharding >= core::DataSharding::optim_grads;
    p.overlap_param_gather =
        (space.overlap && zero1) || d.sharding == core::DataSharding::optim_grads_params;
    p.tp_comm_overlap = d.sp && space.tp_comm_overlap.value_or(space.overlap);
    p.overlap_p2p_comm = space.overlap_p2p_comm;
    p.token_dispatcher = space.token_dispatcher.value_or(core::TokenDispatcher::alltoall);
    return p;
}

// The layouts of one (tp, cp, pp, dp): every ep, etp, vpp, schedule, micro-batch, sequence
// parallelism and sharding the search lists.
void add_layouts(const JobSpec& specs, const SearchSpace& space, const Dimensions& dim, Degrees d,
                 std::vector<ParallelPlan>& layouts) {
    const std::vector<bool> both = {false, true};
    // Sequence parallelism needs tp > 1 and ZeRO-1 needs more than one data-parallel rank;
    // unless pinned, the pointless combinations are not generated.
    std::vector<bool> sps = space.sequence_parallel, zero1s = space.distributed_optimizer;
    if (sps.empty()) sps = d.tp > 1 ? both : std::vector<bool>{false};
    if (zero1s.empty()) zero1s = d.dp * d.cp > 1 ? both : std::vector<bool>{false};
    // Pinned strategies replace the distributed optimizer's on and off.
    std::vector<core::DataSharding> shardings = space.sharding;
    if (shardings.empty())
        for (bool zero1 : zero1s)
            shardings.push_back(zero1 ? core::DataSharding::optim : core::DataSharding::no_shard);
    for (std::int64_t ep : dim.ep)
        for (const std::optional<std::int64_t>& etp : expert_tp_degrees(specs, space, d.tp))
            for (std::int64_t vpp : dim.vpp)
                for (ScheduleKind schedule : dim.schedules) {
                    if (!schedule_fits(schedule, vpp, d.pp, space)) continue;
                    for (std::int64_t mbs : dim.mbs)
                        for (bool sp : sps)
                            for (core::DataSharding sharding : shardings) {
                                // Folded experts need sequence parallelism (unless the user
                                // pinned it off: validation then says why).
                                if (etp && *etp != d.tp && !sp && space.sequence_parallel.empty())
                                    continue;
                                d.ep = ep;
                                d.etp = etp;
                                d.vpp = vpp;
                                d.schedule = schedule;
                                d.mbs = mbs;
                                d.sp = sp;
                                d.sharding = sharding;
                                layouts.push_back(layout_of(d, space));
                            }
                }
}

// Every combination of the listed values that forms a layout of the cluster's devices.
std::vector<ParallelPlan> enumerate(const JobSpec& specs, const SearchSpace& space,
                                    PlanResult& result) {
    const Dimensions dim = dimensions(specs, space);
    const std::int64_t devices = specs.cluster.devices();
    std::vector<ParallelPlan> layouts;
    for (std::int64_t tp : dim.tp)
        for (std::int64_t cp : dim.cp)
            for (std::int64_t pp : dim.pp) {
                if (tp < 1 || cp < 1 || pp < 1 || devices % (tp * cp * pp) != 0) {
                    ++result.layouts;
                    record_rejection(
                        result, "cluster",
                        std::to_string(devices) +
                            " devices are not divisible by tp·cp·pp = " + std::to_string(tp) + "·" +
                            std::to_string(cp) + "·" + std::to_string(pp));
                    continue;
                }
                Degrees d{};
                d.tp = tp;
                d.cp = cp;
                d.pp = pp;
                d.dp = devices / (tp * cp * pp);
                add_layouts(specs, space, dim, d, layouts);
            }
    result.layouts += std::int64_t(layouts.size());
    return layouts;
}

Candidate candidate(const Feasible& f, const simulator::Report& r) {
    Candidate c;
    c.job = f.job;
    c.recompute_reason = f.recompute_why.text(f.job.plan.recompute);
    c.split_reason = f.split_reason;
    c.memory_savers = f.memory_savers;
    c.step_time_s = r.step_time_s;
    c.tokens_per_s = r.tokens_per_s;
    c.tflops_per_device = r.tflops_per_device;
    c.mfu = r.mfu;
    c.mfu_fp8_peak = r.mfu_fp8_peak;
    for (const auto& s : r.stages)
        c.bubble_fraction = std::max(c.bubble_fraction, s.bubble_fraction(r.step_time_s));
    c.peak_memory_bytes = f.peak.bytes;
    c.peak_stage = f.peak.stage;
    c.cross_node_groups = cross_node_groups(f.job);
    for (const auto& s : r.stages)
        if (s.moe_exchange_s > c.moe_exchange_s) {
            c.moe_exchange_s = s.moe_exchange_s;
            c.moe_exposed_s = s.moe_exchange_s - s.moe_hidden_s;
        }
    if (f.job.model.moe) {
        c.moe_domains = core::RankGrid(f.job.plan)
                            .nodes_spanned(simulator::moe_exchange_group(f.job.plan), 0,
                                           f.job.cluster.fabric_domain());
    }
    return c;
}

// Adds one checker's counts to `into`, which holds the earlier layouts' (its examples win).
void merge_checks(const PlanResult& from, PlanResult& into) {
    for (const auto& [kind, group] : from.rejections) {
        RejectionGroup& g = into.rejections[kind];
        if (g.count == 0) {
            g.field = group.field;
            g.example = group.example;
        }
        g.count += group.count;
    }
    into.layouts += from.layouts;
    into.closest_rejected.insert(into.closest_rejected.end(), from.closest_rejected.begin(),
                                 from.closest_rejected.end());
    if (from.smallest_peak_bytes < into.smallest_peak_bytes) {
        into.smallest_peak_bytes = from.smallest_peak_bytes;
        into.smallest_layout = from.smallest_layout;
    }
}

// The checks, on two threads (this machine's cores) taking contiguous blocks of layouts in
// turn (the memory-tight ones, which try more shardings, cluster); the blocks come back in
// enumeration order, so merged they give one thread's result.
std::vector<CheckedLayouts> check_on_two_threads(const std::vector<ParallelPlan>& layouts,
                                                 LayoutChecker& first, LayoutChecker& second,
                                                 const PlanOptions& options) {
    constexpr std::size_t kBlock = 512;
    std::vector<CheckedLayouts> part((layouts.size() + kBlock - 1) / kBlock);
    for (CheckedLayouts& p : part) p.result.smallest_peak_bytes = INFINITY;
    std::atomic<std::size_t> next_block{0};
    const auto work = [&](LayoutChecker& checker, const std::function<void(const Progress&)>& on) {
        for (std::size_t b = next_block++; b < part.size(); b = next_block++)
            checker.check(layouts, b * kBlock, std::min(layouts.size(), (b + 1) * kBlock), part[b],
                          on);
    };
    std::exception_ptr helper_error;
    std::thread helper([&] {
        try {
            work(second, {});
        } catch (...) {
            next_block = part.size(); // the other thread stops too
            helper_error = std::current_exception();
        }
    });
    try {
        work(first, options.on_progress);
    } catch (...) {
        next_block = part.size();
        helper.join();
        throw;
    }
    helper.join();
    if (helper_error) std::rethrow_exception(helper_error);
    return part;
}

} // namespace

namespace {

// One search over the layouts of `specs` as given (the model's own capacity factor).
PlanResult search(const JobSpec& specs, const core::Profile& profile, const SearchSpace& space,
                  const PlanOptions& options) {
    const auto started = std::chrono::steady_clock::now();
    PlanResult result;
    result.smallest_peak_bytes = INFINITY;
    const auto cancelled = [&] { return options.cancel && options.cancel->load(); };

    const std::vector<ParallelPlan> layouts = enumerate(specs, space, result);
    LayoutChecker first(specs, profile, space, options), second(specs, profile, space, options);
    // A pinned precision the device does not run is refused before any layout is checked.
    for (const core::Fp8& precision : space.precisions) {
        JobSpec probe = specs;
        probe.plan.fp8 = precision;
        simulator::fp8_rate(probe, profile);
    }
    std::vector<CheckedLayouts> part = check_on_two_threads(layouts, first, second, options);
    std::vector<Feasible> feasible;
    for (CheckedLayouts& p : part)
        for (Feasible& f : p.feasible) feasible.push_back(std::move(f));
    for (const CheckedLayouts& p : part) merge_checks(p.result, result);
    result.feasible = std::int64_t(feasible.size());
    std::stable_sort(
        result.closest_rejected.begin(), result.closest_rejected.end(),
        [](const Rejection& a, const Rejection& b) { return a.overrun_bytes < b.overrun_bytes; });
    if (result.closest_rejected.size() > options.rejected_examples)
        result.closest_rejected.resize(options.rejected_examples);

    // Full simulations in order of the bound, until the bound passes the k-th best (sorting
    // indices: a Feasible holds a whole job).
    std::vector<std::size_t> order(feasible.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
        return feasible[a].lower_bound_s < feasible[b].lower_bound_s;
    });
    for (std::size_t i = 0; i < feasible.size() && !cancelled(); ++i) {
        const Feasible& f = feasible[order[i]];
        if (!options.exhaustive && result.best.size() >= options.top_k &&
            f.lower_bound_s > result.best.back().step_time_s * (1 + 1e-9))
            break;
        if (options.on_progress && i % 8 == 0)
            options.on_progress({"simulate", std::int64_t(i), std::int64_t(feasible.size())});
        simulator::SimulateOptions sim;
        sim.in_flight =
            &first.in_flight().get(f.job.plan, std::int32_t(f.job.micro_batches_per_step()));
        sim.parameters = &first.parameters().get(f.job);
        sim.layer_costs = &first.layer_costs();
        Candidate c = candidate(f, simulator::simulate(f.job, profile, sim));
        ++result.simulated;
        result.best.insert(
            std::upper_bound(result.best.begin(), result.best.end(), c, ranks_before),
            std::move(c));
        if (result.best.size() > options.top_k) result.best.pop_back();
    }
    result.cancelled = cancelled();
    if (!std::isfinite(result.smallest_peak_bytes)) result.smallest_peak_bytes = 0.0;
    result.seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    return result;
}

} // namespace

PlanResult plan(const JobSpec& specs, const core::Profile& profile, const SearchSpace& space,
                const PlanOptions& options) {
    if (space.capacity_factors.empty() || !specs.model.moe)
        return search(specs, profile, space, options);
    // Each capacity factor is a model of its own (tokens over it dropped, the rest padded to
    // it): one search each, the candidates ranked together.
    PlanResult result;
    result.smallest_peak_bytes = INFINITY;
    for (const std::optional<double>& capacity : space.capacity_factors) {
        JobSpec with = specs;
        with.model.moe->capacity_factor = capacity;
        with.model.moe->pad_to_capacity = capacity && specs.model.moe->pad_to_capacity;
        PlanResult one = search(with, profile, space, options);
        merge_checks(one, result);
        result.feasible += one.feasible;
        result.simulated += one.simulated;
        result.seconds += one.seconds;
        result.cancelled = result.cancelled || one.cancelled;
        for (Candidate& c : one.best)
            result.best.insert(
                std::upper_bound(result.best.begin(), result.best.end(), c, ranks_before),
                std::move(c));
        if (result.best.size() > options.top_k) result.best.resize(options.top_k);
        if (result.cancelled) break;
    }
    std::stable_sort(
        result.closest_rejected.begin(), result.closest_rejected.end(),
        [](const Rejection& a, const Rejection& b) { return a.overrun_bytes < b.overrun_bytes; });
    if (result.closest_rejected.size() > options.rejected_examples)
        result.closest_rejected.resize(options.rejected_examples);
    if (!std::isfinite(result.smallest_peak_bytes)) result.smallest_peak_bytes = 0.0;
    return result;
}

std::int32_t cross_node_groups(const JobSpec& job) {
    const core::RankGrid grid(job.plan);
    std::int32_t n = 0;
    for (auto kind : {core::GroupKind::tensor, core::GroupKind::context, core::GroupKind::expert,
                      core::GroupKind::data_context, core::GroupKind::pipeline}) {
        n += grid.nodes_spanned(kind, 0, job.cluster.fabric_domain()) > 1;
    }
    return n;
}

bool ranks_before(const Candidate& a, const Candidate& b) {
    const double scale = std::max(a.step_time_s, b.step_time_s);
    if (std::fabs(a.step_time_s - b.step_time_s) > 1e-9 * scale)
        return a.step_time_s < b.step_time_s;
    if (a.peak_memory_bytes != b.peak_memory_bytes)
        return a.peak_memory_bytes < b.peak_memory_bytes;
    return a.cross_node_groups < b.cross_node_groups;
}

} // namespace trident::planner
