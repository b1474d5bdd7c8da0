#include "trident/planner/planner.h"

#include "split_choices.h"
#include "trident/core/rank_grid.h"
#include "trident/core/schedule.h"
#include "trident/core/spec_error.h"
#include "trident/core/units.h"
#include "trident/simulator/cost_model.h"
#include "trident/simulator/memory.h"
#include "trident/simulator/simulate.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <tuple>

namespace trident::planner {

using core::JobSpec;
using core::ParallelPlan;
using core::Recompute;
using core::RecomputeGranularity;
using core::ScheduleKind;

namespace {

const auto bytes_text = [](double bytes) { return core::bytes_text(bytes); };

std::vector<std::int64_t> divisors_up_to(std::int64_t n, std::int64_t limit) {
    std::vector<std::int64_t> out;
    for (std::int64_t d = 1; d <= std::min(n, limit); ++d)
        if (n % d == 0) out.push_back(d);
    return out;
}

std::string describe(const ParallelPlan& p) {
    return "tp " + std::to_string(p.tp) + " cp " + std::to_string(p.cp) + " pp " +
           std::to_string(p.pp) + " dp " + std::to_string(p.dp) + " ep " + std::to_string(p.ep) +
           " vpp " + std::to_string(p.vpp) + " " + core::to_string(p.schedule) + " mbs " +
           std::to_string(p.micro_batch_size) + (p.sequence_parallel ? " sp" : "") +
           (p.distributed_optimizer ? " zero1" : "");
}

std::string recompute_phrase(const Recompute& r, std::int64_t layers_per_chunk) {
    return "recompute " + core::describe(r, layers_per_chunk);
}

struct Peak {
    double bytes = 0.0;
    std::int32_t stage = 0;
};

Peak peak_of(const std::vector<simulator::StageMemory>& stages) {
    Peak p;
    for (std::size_t s = 0; s < stages.size(); ++s)
        if (stages[s].total_bytes() > p.bytes) p = {stages[s].total_bytes(), std::int32_t(s)};
    return p;
}

// Schedules' in-flight counts depend only on (kind, p, v, m): computed once each.
class InFlightCache {
public:
    const std::vector<core::InFlight>& get(const ParallelPlan& p, std::int32_t m) {
        const auto key = std::make_tuple(int(p.schedule), p.pp, p.vpp, m);
        auto it = cache_.find(key);
        if (it == cache_.end())
            it = cache_
                     .emplace(key, simulator::in_flight_per_rank(core::make_schedule(
                                       p.schedule, std::int32_t(p.pp), std::int32_t(p.vpp), m)))
                     .first;
        return it->second;
    }

private:
    std::map<std::tuple<int, std::int64_t, std::int64_t, std::int32_t>, std::vector<core::InFlight>>
        cache_;
};

// A stage's parameters depend on tp, ep and which layers it holds, not on the batch, the
// schedule or the optimizer: computed once per split.
class ParameterCache {
public:
    const std::vector<simulator::StageParameters>& get(const JobSpec& job) {
        const core::ParallelPlan& p = job.plan;
        auto key = std::make_tuple(p.tp, p.ep, p.pp, p.vpp, job.pipeline_split().layers);
        auto it = cache_.find(key);
        if (it == cache_.end())
            it = cache_.emplace(std::move(key), simulator::parameters_per_stage(job)).first;
        return it->second;
    }

private:
    std::map<std::tuple<std::int64_t, std::int64_t, std::int64_t, std::int64_t,
                        std::vector<std::int64_t>>,
             std::vector<simulator::StageParameters>>
        cache_;
};

struct Feasible {
    JobSpec job;
    std::string recompute_reason;
    std::string split_reason;
    Peak peak;
    double lower_bound_s = 0.0;
};

std::int32_t cross_node_groups(const JobSpec& job) {
    const core::RankGrid grid(job.plan);
    std::int32_t n = 0;
    for (auto kind : {core::GroupKind::tensor, core::GroupKind::context, core::GroupKind::expert,
                      core::GroupKind::data_context, core::GroupKind::pipeline}) {
        n += grid.nodes_spanned(kind, 0, job.cluster.devices_per_node) > 1;
    }
    return n;
}

// Ranking: faster first; equal times (within 1e-9) prefer less memory, then fewer groups
// across the slow fabric.
bool better(const Candidate& a, const Candidate& b) {
    const double scale = std::max(a.step_time_s, b.step_time_s);
    if (std::fabs(a.step_time_s - b.step_time_s) > 1e-9 * scale)
        return a.step_time_s < b.step_time_s;
    if (a.peak_memory_bytes != b.peak_memory_bytes)
        return a.peak_memory_bytes < b.peak_memory_bytes;
    return a.cross_node_groups < b.cross_node_groups;
}

// The candidate values of each dimension.
struct Dimensions {
    std::vector<std::int64_t> tp, pp, cp, ep, vpp, mbs;
    std::vector<ScheduleKind> schedules;
};

Dimensions dimensions(const JobSpec& specs, const SearchSpace& space) {
    const std::int64_t devices = specs.cluster.devices();
    Dimensions d;
    d.tp = !space.tp.empty()
               ? space.tp
               : divisors_up_to(
                     devices, space.allow_cross_node_tp ? devices : specs.cluster.devices_per_node);
    // Stages need not hold equal layer counts (core/pipeline_split.h): any degree that divides
    // the devices, up to one layer per stage.
    d.pp = !space.pp.empty() ? space.pp : divisors_up_to(devices, specs.model.num_layers);
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
    d.schedules =
        !space.schedules.empty()
            ? space.schedules
            : std::vector<ScheduleKind>{ScheduleKind::one_f_one_b, ScheduleKind::interleaved_1f1b,
                                        ScheduleKind::zero_bubble_h1, ScheduleKind::gpipe};
    return d;
}

// Every combination of the listed values that forms a layout of the cluster's devices.
std::vector<ParallelPlan> enumerate(const JobSpec& specs, const SearchSpace& space,
                                    PlanResult& result) {
    const Dimensions dim = dimensions(specs, space);
    const std::int64_t devices = specs.cluster.devices();
    const std::vector<bool> both = {false, true};
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
                const std::int64_t dp = devices / (tp * cp * pp);
                // Sequence parallelism needs tp > 1 and ZeRO-1 needs more than one data-parallel
                // rank; unless pinned, the pointless combinations are not generated.
                std::vector<bool> sps = space.sequence_parallel,
                                  zero1s = space.distributed_optimizer;
                if (sps.empty()) sps = tp > 1 ? both : std::vector<bool>{false};
                if (zero1s.empty()) zero1s = dp * cp > 1 ? both : std::vector<bool>{false};
                for (std::int64_t ep : dim.ep)
                    for (std::int64_t vpp : dim.vpp)
                        for (ScheduleKind schedule : dim.schedules) {
                            // Virtual stages belong to the interleaved schedule only, and
                            // without pipelining every schedule is the same: 1F1B stands for
                            // them (unless the user pinned the schedule).
                            if ((vpp > 1) != (schedule == ScheduleKind::interleaved_1f1b)) continue;
                            if (pp == 1 && space.schedules.empty() &&
                                schedule != ScheduleKind::one_f_one_b)
                                continue;
                            for (std::int64_t mbs : dim.mbs)
                                for (bool sp : sps)
                                    for (bool zero1 : zero1s) {
                                        ParallelPlan p;
                                        p.tp = tp;
                                        p.cp = cp;
                                        p.pp = pp;
                                        p.dp = dp;
                                        p.ep = ep;
                                        p.vpp = vpp;
                                        p.schedule = schedule;
                                        p.micro_batch_size = mbs;
                                        p.sequence_parallel = sp;
                                        p.distributed_optimizer = zero1;
                                        p.allow_cross_node_tp = space.allow_cross_node_tp;
                                        p.flash_attention = space.flash_attention;
                                        p.overlap_grad_reduce = space.overlap;
                                        p.overlap_param_gather = space.overlap && zero1;
                                        layouts.push_back(p);
                                    }
                        }
            }
    result.layouts += std::int64_t(layouts.size());
    return layouts;
}

// Chooses the recomputation for a valid layout (the pinned one, or the cheapest that fits:
// none, selective, then full for the fewest layers per chunk). Returns false, recording the
// rejection, when nothing fits.
bool choose_recompute(JobSpec& job, const SearchSpace& space, double budget,
                      const std::vector<core::InFlight>& flights,
                      const std::vector<simulator::StageParameters>& parameters, Feasible& out,
                      PlanResult& result) {
    ParallelPlan& p = job.plan;
    const std::int64_t per_chunk = job.max_layers_per_chunk();
    const auto peak_with = [&](const Recompute& r) {
        p.recompute = r;
        return peak_of(simulator::memory_per_stage(job, flights, &parameters));
    };
    // `rule` names the kind ("over budget even with full recomputation"); the details after
    // the semicolon carry this layout's numbers.
    const auto over_budget = [&](const Recompute& r, const Peak& pk, const std::string& rule) {
        if (pk.bytes < result.smallest_peak_bytes) {
            result.smallest_peak_bytes = pk.bytes;
            result.smallest_layout = describe(p) + ", " + recompute_phrase(r, per_chunk);
        }
        record_rejection(result, "memory",
                         rule + "; stage " + std::to_string(pk.stage) + " needs " +
                             bytes_text(pk.bytes) + ", " + bytes_text(pk.bytes - budget) +
                             " over the budget of " + bytes_text(budget) + " (" + describe(p) +
                             ", " + recompute_phrase(r, per_chunk) + ")");
        result.closest_rejected.push_back(
            {p,
             "stage " + std::to_string(pk.stage) + " needs " + bytes_text(pk.bytes) + " with " +
                 recompute_phrase(r, per_chunk) + ", over the budget by " +
                 bytes_text(pk.bytes - budget),
             pk.bytes - budget});
        return false;
    };
    const auto accept = [&](const Recompute& r, const Peak& pk, std::string why) {
        p.recompute = r;
        out.peak = pk;
        out.recompute_reason = why + " (budget " + bytes_text(budget) + ")";
        return true;
    };
    if (space.recompute) {
        const Recompute pinned = p.recompute; // resolved by plan() before validation
        const Peak pk = peak_with(pinned);
        if (pk.bytes > budget)
            return over_budget(pinned, pk, "over budget with the pinned recomputation");
        return accept(pinned, pk,
                      "pinned: " + recompute_phrase(pinned, per_chunk) + " needs " +
                          bytes_text(pk.bytes));
    }
    const Peak none = peak_with({});
    if (none.bytes <= budget)
        return accept({}, none,
                      "no recomputation needed: " + bytes_text(none.bytes) + " on stage " +
                          std::to_string(none.stage));
    std::string why =
        "none needs " + bytes_text(none.bytes) + " on stage " + std::to_string(none.stage);
    const Recompute selective{RecomputeGranularity::selective, core::RecomputeMethod::block, 0};
    const Peak sel = peak_with(selective);
    if (sel.bytes <= budget)
        return accept(selective, sel, why + "; selective fits at " + bytes_text(sel.bytes));
    why += ", selective " + bytes_text(sel.bytes);
    // Memory falls as more layers are recomputed: the fewest that fit, by bisection.
    const auto full = [](std::int64_t k) {
        return Recompute{RecomputeGranularity::full, core::RecomputeMethod::block, k};
    };
    const Peak all = peak_with(full(per_chunk));
    if (all.bytes > budget)
        return over_budget(full(per_chunk), all, "over budget even with full recomputation");
    std::int64_t lo = 1, hi = per_chunk;
    while (lo < hi) {
        const std::int64_t mid = (lo + hi) / 2;
        if (peak_with(full(mid)).bytes <= budget)
            hi = mid;
        else
            lo = mid + 1;
    }
    const Peak fit = peak_with(full(lo));
    return accept(full(lo), fit,
                  why + "; " + recompute_phrase(full(lo), per_chunk) + " fits at " +
                      bytes_text(fit.bytes));
}

// A lower bound on the simulated step time. Pipeline rank r cannot start before the first
// micro-batch's forward has passed the ranks below it (chunk 0), must then do all its own
// work and its step tail; and after its last input-gradient pass (chunk 0's, of the last
// micro-batch) the ranks below must still run theirs. Point-to-point time is left out, so the
// bound stays below what the discrete-event run finds.
double lower_bound_s(const JobSpec& job, const core::Profile& profile,
                     const std::vector<simulator::StageParameters>& parameters) {
    const simulator::CostModel cost(job, profile, &parameters);
    const double m = double(job.micro_batches_per_step());
    double bound = 0.0, forward_below = 0.0, backward_below = 0.0;
    for (std::int32_t r = 0; r < job.plan.pp; ++r) {
        double busy = 0.0, without_weight = 0.0;
        for (std::int32_t c = 0; c < job.plan.vpp; ++c) {
            const simulator::ChunkCost& cc = cost.chunk(r, c);
            without_weight += cc.forward.total_s() + cc.backward_input.total_s();
            busy +=
                cc.forward.total_s() + cc.backward_input.total_s() + cc.backward_weight.total_s();
        }
        const double tail = simulator::step_tail(job, cost, r).total_s();
        bound = std::max({bound, forward_below + m * busy + tail,
                          forward_below + m * without_weight + backward_below});
        forward_below += cost.chunk(r, 0).forward.total_s();
        backward_below += cost.chunk(r, 0).backward_input.total_s();
    }
    return bound;
}

Candidate candidate(const Feasible& f, const simulator::Report& r) {
    Candidate c;
    c.job = f.job;
    c.recompute_reason = f.recompute_reason;
    c.split_reason = f.split_reason;
    c.step_time_s = r.step_time_s;
    c.tokens_per_s = r.tokens_per_s;
    c.tflops_per_device = r.tflops_per_device;
    c.mfu = r.mfu;
    for (const auto& s : r.stages)
        c.bubble_fraction = std::max(c.bubble_fraction, s.bubble_fraction(r.step_time_s));
    c.peak_memory_bytes = f.peak.bytes;
    c.peak_stage = f.peak.stage;
    c.cross_node_groups = cross_node_groups(f.job);
    return c;
}

} // namespace

PlanResult plan(const JobSpec& specs, const core::Profile& profile, const SearchSpace& space,
                const PlanOptions& options) {
    const auto started = std::chrono::steady_clock::now();
    PlanResult result;
    result.smallest_peak_bytes = INFINITY;
    const auto cancelled = [&] { return options.cancel && options.cancel->load(); };

    const std::vector<ParallelPlan> layouts = enumerate(specs, space, result);
    InFlightCache in_flight;
    ParameterCache stage_parameters;
    SplitChooser splits(space, profile);
    std::vector<Feasible> feasible;
    for (std::size_t i = 0; i < layouts.size() && !cancelled(); ++i) {
        if (options.on_progress && i % 64 == 0)
            options.on_progress({"memory", std::int64_t(i), std::int64_t(layouts.size())});
        JobSpec job = specs;
        job.plan = layouts[i];
        std::vector<SplitChoice> choices;
        try {
            choices = splits.choices(job);
        } catch (const core::SpecError& e) {
            record_rejection(result, e.field(), e.reason());
            continue;
        }
        if (choices.empty()) // no split fits: validation says why
            choices.push_back({});
        for (const SplitChoice& choice : choices) {
            Feasible f{job, "", "", {}, 0.0};
            apply(choice, f.job.plan);
            f.split_reason = choice.reason;
            try {
                if (space.recompute)
                    f.job.plan.recompute = core::with_recompute_defaults(
                        *space.recompute, f.job.max_layers_per_chunk());
                core::validate(f.job);
            } catch (const core::SpecError& e) {
                record_rejection(result, e.field(), e.reason());
                continue;
            }
            const auto& flights =
                in_flight.get(f.job.plan, std::int32_t(f.job.micro_batches_per_step()));
            const auto& parameters = stage_parameters.get(f.job);
            if (!choose_recompute(f.job, space, options.memory_budget_bytes, flights, parameters, f,
                                  result))
                continue;
            f.lower_bound_s = lower_bound_s(f.job, profile, parameters);
            feasible.push_back(std::move(f));
        }
    }
    result.feasible = std::int64_t(feasible.size());
    std::sort(
        result.closest_rejected.begin(), result.closest_rejected.end(),
        [](const Rejection& a, const Rejection& b) { return a.overrun_bytes < b.overrun_bytes; });
    if (result.closest_rejected.size() > options.rejected_examples)
        result.closest_rejected.resize(options.rejected_examples);

    // Full simulations in order of the bound, until the bound passes the k-th best.
    std::sort(feasible.begin(), feasible.end(), [](const Feasible& a, const Feasible& b) {
        return a.lower_bound_s < b.lower_bound_s;
    });
    for (std::size_t i = 0; i < feasible.size() && !cancelled(); ++i) {
        const Feasible& f = feasible[i];
        if (!options.exhaustive && result.best.size() >= options.top_k &&
            f.lower_bound_s > result.best.back().step_time_s * (1 + 1e-9))
            break;
        if (options.on_progress && i % 8 == 0)
            options.on_progress({"simulate", std::int64_t(i), std::int64_t(feasible.size())});
        simulator::SimulateOptions sim;
        sim.in_flight = &in_flight.get(f.job.plan, std::int32_t(f.job.micro_batches_per_step()));
        sim.parameters = &stage_parameters.get(f.job);
        Candidate c = candidate(f, simulator::simulate(f.job, profile, sim));
        ++result.simulated;
        result.best.insert(std::upper_bound(result.best.begin(), result.best.end(), c, better),
                           std::move(c));
        if (result.best.size() > options.top_k) result.best.pop_back();
    }
    result.cancelled = cancelled();
    if (!std::isfinite(result.smallest_peak_bytes)) result.smallest_peak_bytes = 0.0;
    result.seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    return result;
}

} // namespace trident::planner
