#include "layout_checks.h"

#include "trident/core/spec_error.h"
#include "trident/core/units.h"
#include "trident/simulator/moe_overlap.h"
#include "trident/simulator/simulate.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <optional>
#include <tuple>

namespace trident::planner {

using core::JobSpec;
using core::ParallelPlan;
using core::Recompute;
using core::RecomputeGranularity;

std::string describe(const ParallelPlan& p) {
    return "tp " + std::to_string(p.tp) + " cp " + std::to_string(p.cp) + " pp " +
           std::to_string(p.pp) + " dp " + std::to_string(p.dp) + " ep " + std::to_string(p.ep) +
           (p.etp ? " etp " + std::to_string(*p.etp) : "") + " vpp " + std::to_string(p.vpp) + " " +
           core::to_string(p.schedule) + " mbs " + std::to_string(p.micro_batch_size) +
           (p.sequence_parallel ? " sp" : "") +
           (p.zero_stage() > 0 ? " zero" + core::sharding_cell(p) : "");
}

namespace {

const auto bytes_text = [](double bytes) { return core::bytes_text(bytes); };

std::string recompute_phrase(const Recompute& r, std::int64_t layers_per_chunk) {
    return "recompute " + core::describe(r, layers_per_chunk);
}

// A layout that does not fit with recomputation `r` (peak `peak`).
struct OverBudget {
    const Recompute& recompute;
    std::int64_t per_chunk;
    const Peak& peak;
    double budget;
    std::size_t keep_closest;
};

// Records a layout over the memory budget: the smallest peak seen, its rejection group
// (`rule` names the kind, "over budget even with full recomputation"; the details after the
// semicolon carry the first example's numbers) and the closest misses, kept sorted and few.
void record_over_budget(PlanResult& result, const ParallelPlan& p, const OverBudget& o,
                        const std::string& rule) {
    const Peak& pk = o.peak;
    const std::string recompute = recompute_phrase(o.recompute, o.per_chunk);
    if (pk.bytes < result.smallest_peak_bytes) {
        result.smallest_peak_bytes = pk.bytes;
        result.smallest_layout = describe(p) + ", " + recompute;
    }
    RejectionGroup& group = result.rejections[rejection_kind("memory", rule)];
    if (group.count++ == 0) {
        group.field = "memory";
        group.example = rule + "; stage " + std::to_string(pk.stage) + " needs " +
                        bytes_text(pk.bytes) + ", " + bytes_text(pk.bytes - o.budget) +
                        " over the budget of " + bytes_text(o.budget) + " (" + describe(p) + ", " +
                        recompute + ")";
    }
    auto& closest = result.closest_rejected;
    const std::size_t keep = std::max<std::size_t>(8, 2 * o.keep_closest);
    const double overrun = pk.bytes - o.budget;
    if (closest.size() >= keep && overrun >= closest.back().overrun_bytes) return;
    closest.push_back({p,
                       "stage " + std::to_string(pk.stage) + " needs " + bytes_text(pk.bytes) +
                           " with " + recompute + ", over the budget by " + bytes_text(overrun),
                       overrun});
    std::stable_sort(closest.begin(), closest.end(), [](const Rejection& a, const Rejection& b) {
        return a.overrun_bytes < b.overrun_bytes;
    });
    if (closest.size() > keep) closest.pop_back();
}

// Chooses the recomputation for a valid layout (the pinned one, or the cheapest that fits:
// none, selective, then full for the fewest layers per chunk). Returns false, recording the
// rejection, when nothing fits.
bool choose_recompute(JobSpec& job, const SearchSpace& space, double budget,
                      const std::vector<core::InFlight>& flights,
                      const std::vector<simulator::StageParameters>& parameters,
                      StageMemoryCache& memory, RecomputeWhy& why, Peak& peak, PlanResult& result,
                      std::size_t keep_closest) {
    ParallelPlan& p = job.plan;
    const std::int64_t per_chunk = job.max_layers_per_chunk();
    const auto peak_with = [&](const Recompute& r) {
        p.recompute = r;
        return memory.peak(job, flights, parameters);
    };
    const auto over_budget = [&](const Recompute& r, const Peak& pk, const std::string& rule) {
        record_over_budget(result, p, {r, per_chunk, pk, budget, keep_closest}, rule);
        return false;
    };
    // The reason is written only for the candidates shown (RecomputeWhy::text).
    why = {};
    why.budget = budget;
    why.per_chunk = per_chunk;
    const auto accept = [&](const Recompute& r, const Peak& pk) {
        p.recompute = r;
        peak = pk;
        why.fit = pk;
        return true;
    };
    if (space.recompute) {
        const Recompute pinned = p.recompute; // resolved by plan() before validation
        const Peak pk = peak_with(pinned);
        if (pk.bytes > budget)
            return over_budget(pinned, pk, "over budget with the pinned recomputation");
        why.pinned = true;
        return accept(pinned, pk);
    }
    why.none = peak_with({});
    if (why.none.bytes <= budget) return accept({}, why.none);
    const Recompute selective{RecomputeGranularity::selective, core::RecomputeMethod::block, 0};
    why.selective = peak_with(selective);
    if (why.selective.bytes <= budget) return accept(selective, why.selective);
    // MoE and MLA models: the output-discarding modules (norms, MLA up-projections, the
    // experts' activation) cost a few memory-bound passes and a small GEMM — far less than
    // recomputing whole layers (DeepSeek-V3 §3.2.3 trains with them).
    if (const std::uint32_t light =
            core::light_recompute_modules(job.model.moe.has_value(), job.model.mla.has_value())) {
        Recompute modules = selective;
        modules.modules = light;
        why.modules = peak_with(modules);
        if (why.modules.bytes <= budget) return accept(modules, why.modules);
    }
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
    return accept(full(lo), peak_with(full(lo)));
}

// A lower bound on the simulated step time. Pipeline rank r cannot start before the first
// micro-batch's forward has passed the ranks below it (chunk 0), must then do all its own
// work and its step tail; and after its last input-gradient pass (chunk 0's, of the last
// micro-batch) the ranks below must still run theirs. Point-to-point time is left out, and
// with the MoE all-to-all overlap the whole exchange of all but one micro-batch's passes (at
// most that hides: the first forward and the last backward have no partner), less the SMs it
// takes, so the bound stays below what the discrete-event run finds.
double lower_bound_s(const JobSpec& job, const core::Profile& profile,
                     const std::vector<simulator::StageParameters>& parameters,
                     simulator::LayerCostCache& layer_costs) {
    const simulator::CostModel cost(job, profile, &parameters, &layer_costs);
    // Each chunk runs m micro-batches (m/2 under DualPipe, whose second copy also starts from
    // the last rank: no rank waits for the ranks before it there).
    const double m = double(job.plan.chunk_microbatches(job.micro_batches_per_step()));
    const bool one_direction =
        core::placement_of(job.plan.schedule) != core::StagePlacement::two_copies;
    const bool moe_overlap = job.plan.overlap_moe_expert_parallel_comm;
    double bound = 0.0, forward_below = 0.0, backward_below = 0.0;
    for (std::int32_t r = 0; r < job.plan.pp; ++r) {
        double busy = 0.0, without_weight = 0.0, hideable = 0.0;
        double alone_forward = INFINITY, alone_backward = INFINITY; // the unpaired passes' least
        for (std::int32_t c = 0; c < job.plan.vpp; ++c) {
            const simulator::ChunkCost& cc = cost.chunk(r, c);
            without_weight += cc.forward.total_s() + cc.backward_input.total_s();
            busy +=
                cc.forward.total_s() + cc.backward_input.total_s() + cc.backward_weight.total_s();
            hideable += m * (cc.forward.moe_exchange_s + cc.backward_input.moe_exchange_s);
            alone_forward = std::min(alone_forward, cc.forward.moe_exchange_s);
            alone_backward = std::min(alone_backward, cc.backward_input.moe_exchange_s);
        }
        if (moe_overlap)
            hideable = (hideable - alone_forward - alone_backward) *
                       (1.0 - cost.overlap_slowdown(simulator::moe_exchange_group(job.plan), r));
        else
            hideable = 0.0;
        const double tail = simulator::step_tail(job, cost, r).total_s();
        bound = std::max({bound, forward_below + m * busy - hideable + tail,
                          forward_below + m * without_weight - hideable + backward_below});
        if (!one_direction) continue;
        forward_below += cost.chunk(r, 0).forward.total_s();
        backward_below += cost.chunk(r, 0).backward_input.total_s();
    }
    return bound;
}

} // namespace

std::string RecomputeWhy::text(const Recompute& chosen) const {
    const std::string tail = " (budget " + bytes_text(budget) + ")";
    if (pinned)
        return "pinned: " + recompute_phrase(chosen, per_chunk) + " needs " +
               bytes_text(fit.bytes) + tail;
    if (chosen.granularity == RecomputeGranularity::none)
        return "no recomputation needed: " + bytes_text(none.bytes) + " on stage " +
               std::to_string(none.stage) + tail;
    std::string why =
        "none needs " + bytes_text(none.bytes) + " on stage " + std::to_string(none.stage);
    if (chosen.granularity == RecomputeGranularity::selective &&
        chosen.modules == core::module_bit(core::RecomputeModule::core_attn))
        return why + "; selective fits at " + bytes_text(fit.bytes) + tail;
    why += ", selective " + bytes_text(selective.bytes);
    if (chosen.granularity == RecomputeGranularity::selective)
        return why + "; " + recompute_phrase(chosen, per_chunk) + " fits at " +
               bytes_text(fit.bytes) + tail;
    if (modules.bytes > 0) why += ", selective with modules " + bytes_text(modules.bytes);
    return why + "; " + recompute_phrase(chosen, per_chunk) + " fits at " + bytes_text(fit.bytes) +
           tail;
}

Peak StageMemoryCache::peak(const JobSpec& job, const std::vector<core::InFlight>& flights,
                            const std::vector<simulator::StageParameters>& parameters) {
    const ParallelPlan& p = job.plan;
    const auto key = std::make_tuple(int(p.recompute.granularity), int(p.recompute.method),
                                     p.recompute.num_layers, p.recompute.modules);
    auto it = entries_.find(key);
    if (it == entries_.end()) {
        it = entries_
                 .emplace(key, Entry{p.distributed_optimizer, p.fp8.param_gather,
                                     job.model.precision.optimizer_state, p.sharding,
                                     simulator::memory_per_stage(job, flights, &parameters)})
                 .first;
    } else if (Entry& e = it->second; e.distributed_optimizer != p.distributed_optimizer ||
                                      e.param_gather != p.fp8.param_gather ||
                                      e.moments != job.model.precision.optimizer_state ||
                                      e.sharding.strategy != p.sharding.strategy ||
                                      e.sharding.instances != p.sharding.instances ||
                                      e.sharding.prefetch_units != p.sharding.prefetch_units) {
        for (std::size_t r = 0; r < e.stages.size(); ++r)
            simulator::sharded_state(parameters[r], p, job.model.precision, e.stages[r]);
        e.distributed_optimizer = p.distributed_optimizer;
        e.param_gather = p.fp8.param_gather;
        e.moments = job.model.precision.optimizer_state;
        e.sharding = p.sharding;
    }
    return peak_of(it->second.stages);
}

void LayoutChecker::set_moe_overlaps(ParallelPlan& p) const {
    // The all-to-all overlap wherever Megatron-Core runs it; else the shared experts beside the
    // exchange, for models that have them — each unless --no-overlap or its own flag says no.
    p.overlap_moe_expert_parallel_comm = false;
    p.moe_shared_expert_overlap = false;
    const auto& moe = specs_.model.moe;
    if (!moe || p.ep * p.expert_tp() < 2 || p.token_dispatcher == core::TokenDispatcher::allgather)
        return;
    if (p.ep > 1 && space_.overlap_moe_expert_parallel_comm.value_or(space_.overlap) &&
        core::moe_overlap_schedule_problem(p).empty()) {
        p.overlap_moe_expert_parallel_comm = true;
        return;
    }
    p.moe_shared_expert_overlap = space_.moe_shared_expert_overlap.value_or(space_.overlap) &&
                                  core::shared_expert_overlap_problem(specs_.model, p).empty();
}

LayoutChecker::LayoutChecker(const JobSpec& specs, const core::Profile& profile,
                             const SearchSpace& space, const PlanOptions& options)
    : specs_(specs), profile_(profile), space_(space), options_(options), splits_(space, profile),
      precisions_(precisions_to_try(space, profile)) {}

void LayoutChecker::check(const std::vector<ParallelPlan>& layouts, std::size_t begin,
                          std::size_t end, CheckedLayouts& out,
                          const std::function<void(const Progress&)>& progress) {
    const std::atomic<bool>* cancel = options_.cancel;
    for (std::size_t i = begin; i < end && !(cancel && cancel->load()); ++i) {
        if (progress && i % 64 == 0)
            progress({"memory", std::int64_t(i), std::int64_t(layouts.size())});
        JobSpec job = specs_;
        job.plan = layouts[i];
        std::vector<SplitChoice> choices;
        try {
            choices = splits_.choices(job);
        } catch (const core::SpecError& e) {
            record_rejection(out.result, e.field(), e.reason());
            continue;
        }
        if (choices.empty()) // no split fits: validation says why
            choices.push_back({});
        out.result.layouts += std::int64_t(choices.size() * precisions_.size()) - 1;
        for (const SplitChoice& choice : choices) {
            // The job's rules are checked once per split (the precisions only add their own).
            JobSpec split_job = job;
            apply(choice, split_job.plan);
            split_job.plan.fp8 = precisions_.front();
            try {
                if (space_.recompute)
                    split_job.plan.recompute = core::with_recompute_defaults(
                        *space_.recompute, split_job.max_layers_per_chunk());
                core::validate(split_job);
            } catch (const core::SpecError& e) {
                record_rejection(out.result, e.field(), e.reason());
                continue;
            }
            check_split(split_job, choice.reason, out);
        }
    }
}

std::vector<ParallelPlan> LayoutChecker::sharding_variants(const ParallelPlan& p) const {
    std::vector<ParallelPlan> out = {p};
    if (!space_.sharding.empty() || !space_.distributed_optimizer.empty() || p.zero_stage() != 1 ||
        p.sharding.instances != 1)
        return out;
    // Megatron-FSDP overlaps its reduce-scatters (ZeRO-2/3) and gathers (ZeRO-3) always.
    ParallelPlan zero2 = p;
    zero2.sharding.strategy = core::DataSharding::optim_grads;
    zero2.overlap_grad_reduce = true;
    out.push_back(zero2);
    // ZeRO-3 sharded over the data-parallel ranks inside the NVLink domain (a node, or an NVL72
    // rack), replicated across domains.
    const std::int64_t ranks = p.dp * p.cp, inside = specs_.cluster.fabric_domain() / p.tp;
    ParallelPlan zero3 = zero2;
    zero3.sharding.strategy = core::DataSharding::optim_grads_params;
    zero3.overlap_param_gather = true;
    if (inside >= 2 && ranks > inside && ranks % inside == 0 &&
        p.expert_dp() % (ranks / inside) == 0) {
        ParallelPlan hybrid = zero3;
        hybrid.sharding.instances = ranks / inside;
        out.push_back(hybrid);
    }
    out.push_back(zero3);
    return out;
}

// The MoE token dispatcher that makes the layout's MoE layers fastest (F + B + W of one micro-
// batch on pipeline rank 0): only those layers' exchange differs between dispatchers, so the
// step is fastest with it too. Candidates: alltoall, flex (DeepEP) where ep > 1, allgather where
// the tp·ep group stays inside the NVLink domain. Chosen once per layer shape.
core::TokenDispatcher LayoutChecker::best_dispatcher(const JobSpec& job) {
    const ParallelPlan& p = job.plan;
    if (space_.token_dispatcher) return *space_.token_dispatcher;
    if (!specs_.model.moe || p.expert_tp() * p.ep == 1) return core::TokenDispatcher::alltoall;
    const std::array<std::int64_t, 9> key = {p.tp,
                                             p.cp,
                                             p.ep,
                                             p.expert_tp(),
                                             p.micro_batch_size,
                                             p.sequence_parallel * 2 + p.tp_comm_overlap,
                                             std::int64_t(p.fp8.recipe),
                                             std::int64_t(p.recompute.granularity),
                                             job.training.seq_length};
    const auto known = dispatchers_.find(key);
    if (known != dispatchers_.end()) return known->second;
    std::vector<core::TokenDispatcher> tried = {core::TokenDispatcher::alltoall};
    if (p.ep > 1) tried.push_back(core::TokenDispatcher::flex);
    if (p.expert_tp() * p.ep <= specs_.cluster.fabric_domain())
        tried.push_back(core::TokenDispatcher::allgather);
    core::TokenDispatcher best = tried.front();
    double best_s = INFINITY;
    JobSpec probe = job;
    for (const core::TokenDispatcher d : tried) {
        probe.plan.token_dispatcher = d;
        const simulator::PipelineLoads loads = simulator::pipeline_loads(probe, profile_);
        double moe_s = 0.0;
        for (std::int64_t l = 0; l < probe.model.num_layers; ++l)
            if (probe.model.is_moe_layer(l)) moe_s += loads.layer_s[std::size_t(l)];
        if (moe_s < best_s) {
            best_s = moe_s;
            best = d;
        }
    }
    dispatchers_.emplace(key, best);
    return best;
}

bool LayoutChecker::tp_overlap_pays(const JobSpec& job) {
    const ParallelPlan& p = job.plan;
    if (space_.tp_comm_overlap || !space_.overlap || !p.sequence_parallel || p.tp < 2)
        return p.tp_comm_overlap;
    const std::array<std::int64_t, 8> key = {p.tp,
                                             p.cp,
                                             p.ep,
                                             p.expert_tp(),
                                             p.micro_batch_size,
                                             std::int64_t(p.fp8.recipe),
                                             std::int64_t(p.token_dispatcher),
                                             job.training.seq_length};
    if (const auto known = tp_overlaps_.find(key); known != tp_overlaps_.end())
        return known->second;
    const auto layers_s = [&](bool overlap) {
        JobSpec probe = job;
        probe.plan.tp_comm_overlap = overlap;
        const simulator::PipelineLoads loads = simulator::pipeline_loads(probe, profile_);
        return std::accumulate(loads.layer_s.begin(), loads.layer_s.end(), 0.0);
    };
    const bool pays = layers_s(true) < layers_s(false);
    tp_overlaps_.emplace(key, pays);
    return pays;
}

std::string MemorySaver::text(const core::Fp8& precision) const {
    const std::string gather =
        core::param_gather_name(precision.recipe) + " (the quantized weight is the parameter)";
    const std::string moments = "BF16 Adam moments (precision-aware optimizer)";
    const std::string what = param_gather && bf16_moments ? gather + " and " + moments
                             : param_gather               ? gather
                             : bf16_moments               ? moments
                                                          : "";
    return what.empty() ? what : what + ", taken before more recomputation or sharding";
}

std::vector<MemorySaver> LayoutChecker::savers_for(const core::Fp8& precision,
                                                   const ParallelPlan& variant) const {
    std::vector<MemorySaver> out = {{}};
    // Megatron runs both only beside a sharded optimizer: --fp8-param-gather needs the
    // distributed optimizer or FSDP, --use-precision-aware-optimizer the distributed optimizer.
    if (!space_.memory_savers || !variant.distributed_optimizer) return out;
    // A pinned precision keeps its own parameter gather; PyTorch FSDP2 gathers BF16 weights.
    const bool gather = precision.enabled() && !precision.param_gather &&
                        space_.precisions.empty() &&
                        variant.sharding.implementation != core::FsdpImplementation::torch;
    // Moments already below fp32 (a preset's) or pinned (--exp-avg-dtype) stay as given.
    const bool moments = specs_.model.precision.optimizer_state == core::Dtype::fp32 &&
                         !space_.optimizer_dtype_pinned;
    if (gather) out.push_back({true, false});
    if (moments) out.push_back({false, true});
    if (gather && moments) out.push_back({true, true});
    return out;
}

bool LayoutChecker::check_variant(JobSpec& job, const ParallelPlan& variant,
                                  const core::Fp8& precision, const std::string& split_reason,
                                  StageMemoryCache& memory, MemoryVerdict* shared_verdicts,
                                  CheckedLayouts& out) {
    const std::vector<MemorySaver> savers = savers_for(precision, variant);
    // None first; where none fits at all, the largest saving (the last) next, and the partial
    // savers only if that one fits: each saves less than all of them together.
    std::vector<std::size_t> order(savers.size());
    std::iota(order.begin(), order.end(), std::size_t(0));
    for (std::size_t i = 0; i < order.size(); ++i) {
        const MemorySaver& saver = savers[order[i]];
        if (i > 0) ++out.result.layouts; // a saver tried beyond the enumerated layout
        job.plan = variant;
        job.plan.fp8 = precision;
        job.plan.fp8.param_gather = precision.param_gather || saver.param_gather;
        job.model.precision.optimizer_state =
            saver.bf16_moments ? core::Dtype::bf16 : specs_.model.precision.optimizer_state;
        job.plan.token_dispatcher = best_dispatcher(job);
        job.plan.tp_comm_overlap = tp_overlap_pays(job);
        try {
            core::validate(job.plan);
        } catch (const core::SpecError& e) {
            record_rejection(out.result, e.field(), e.reason());
            continue;
        }
        const auto& parameters = parameters_.get(job);
        // Shared verdicts (the FP8 recipes', by saver), else this precision's own.
        MemoryVerdict own;
        MemoryVerdict& verdict = shared_verdicts ? shared_verdicts[saver.code()] : own;
        if (!verdict.known) {
            const auto& flights =
                in_flight_.get(job.plan, std::int32_t(job.micro_batches_per_step()));
            verdict.fits = choose_recompute(job, space_, options_.memory_budget_bytes, flights,
                                            parameters, memory, verdict.why, verdict.peak,
                                            out.result, options_.rejected_examples);
            verdict.recompute = job.plan.recompute;
            verdict.known = true;
        }
        job.plan.recompute = verdict.recompute;
        if (!verdict.fits) {
            if (i == 0 && order.size() > 2)
                std::rotate(order.begin() + 1, order.end() - 1, order.end());
            else if (i == 1 && order.size() > 2 && order[1] == savers.size() - 1)
                return false; // not even every saver together fits
            continue;
        }
        // After the recomputation is chosen: Megatron runs neither beside some of them.
        set_moe_overlaps(job.plan);
        out.feasible.push_back({job, verdict.why, split_reason, saver.text(precision), verdict.peak,
                                lower_bound_s(job, profile_, parameters, layer_costs_)});
        // Fitting without recomputation, more savers or sharding only cost time.
        if (job.plan.recompute.granularity == RecomputeGranularity::none) return true;
    }
    return false;
}

void LayoutChecker::check_split(const JobSpec& split_job, const std::string& split_reason,
                                CheckedLayouts& out) {
    const std::vector<ParallelPlan> variants = sharding_variants(split_job.plan);
    // The FP8 recipes hold the same bytes; NVFP4 fewer (half-byte copies and saved inputs).
    StageMemoryCache memory[3]; // BF16, FP8, NVFP4
    // FP8's and NVFP4's verdicts, by sharding variant and saver (MemorySaver::code).
    std::vector<MemoryVerdict> verdicts(2 * variants.size() * 4);
    // One job whose plan each variant overwrites: only the layouts that fit are copied out.
    JobSpec job = split_job;
    for (const core::Fp8& precision : precisions_) {
        const int kind = !precision.enabled()                         ? 0
                         : precision.recipe == core::Fp8Recipe::nvfp4 ? 2
                                                                      : 1;
        for (std::size_t v = 0; v < variants.size(); ++v) {
            if (v > 0) ++out.result.layouts; // a sharding tried beyond the enumerated one
            MemoryVerdict* shared =
                kind == 0 ? nullptr
                          : &verdicts[((std::size_t(kind) - 1) * variants.size() + v) * 4];
            if (check_variant(job, variants[v], precision, split_reason, memory[kind], shared, out))
                break;
        }
    }
}

} // namespace trident::planner
