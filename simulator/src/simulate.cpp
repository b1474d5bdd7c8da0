#include "trident/simulator/simulate.h"

#include "trident/core/schedule.h"
#include "trident/core/step_numbers.h"
#include "trident/simulator/flops.h"
#include "trident/simulator/moe_overlap.h"
#include "trident/simulator/pipeline_timeline.h"

#include <algorithm>
#include <cmath>

namespace trident::simulator {

using core::Collective;
using core::GroupKind;

namespace {

// Time of a collective over `total_bytes`, issued in buckets as Megatron's DDP does.
double bucketed(const CostModel& cost, GroupKind group, std::int32_t stage, Collective c,
                double total_bytes, double bucket_bytes) {
    if (total_bytes <= 0) return 0.0;
    const double full = std::floor(total_bytes / bucket_bytes);
    const double rest = total_bytes - full * bucket_bytes;
    double s = 0.0;
    if (full > 0) s += full * cost.collective_s(group, stage, c, bucket_bytes);
    if (rest > 0) s += cost.collective_s(group, stage, c, rest);
    return s;
}

// What the step's tail works with on one stage.
struct TailContext {
    const core::JobSpec& job;
    const CostModel& cost;
    std::int32_t r;
    const StageParameters& params;
    double grad_b, param_b, bucket_bytes;
};

// One model chunk's gradient reduction on a stage: its collectives, the part that can start
// only once the chunk's backward is done (its last bucket), and how long before that its
// buckets can begin (the chunk's last backward pass, where it is bucketed).
struct ChunkReduction {
    double total_s = 0.0, last_bucket_s = 0.0, lead_s = 0.0, ready_s = 0.0;
};

// Gradient reduction: dense grads over dp·cp, expert grads over expert-dp; reduce-scatter into
// the shards with the distributed optimizer, all-reduce without. ZeRO-2/3 have reduce-scattered
// every micro-batch's gradients already (the passes' sharding_s). With hybrid-sharding
// replicas, the shards are then all-reduced across the replicas. Megatron-Core reduces each
// model chunk by itself (its own DDP buffer), in buckets of bucket_bytes on the first pipeline
// rank and as one bucket elsewhere (distributed_data_parallel.py: "data-parallel communication
// on these stages is not on the critical path"); a bucket starts once all its gradients of the
// last micro-batch exist (param_and_grad_buffer.py register_grad_ready).
ChunkReduction reduce_chunk(const TailContext& x, std::size_t chunk) {
    const core::ParallelPlan& p = x.job.plan;
    const int zero = p.zero_stage();
    double dense = 0.0, expert = 0.0;
    for (const core::ShardUnit& u : x.params.units.at(chunk)) {
        dense += double(u.dense);
        expert += double(u.expert);
    }
    const double dense_b = dense * x.grad_b, expert_b = expert * x.grad_b;
    const bool buckets = x.r == 0;
    const auto reduce = [&](GroupKind g, Collective c, double bytes) {
        return buckets ? bucketed(x.cost, g, x.r, c, bytes, x.bucket_bytes)
                       : (bytes > 0 ? x.cost.collective_s(g, x.r, c, bytes) : 0.0);
    };
    ChunkReduction out;
    if (zero == 0) {
        out.total_s = reduce(GroupKind::data_context, Collective::all_reduce, dense_b) +
                      reduce(GroupKind::expert_data, Collective::all_reduce, expert_b);
    } else {
        if (zero == 1)
            out.total_s =
                reduce(GroupKind::data_shard, Collective::reduce_scatter, dense_b) +
                reduce(GroupKind::expert_data_shard, Collective::reduce_scatter, expert_b);
        out.total_s += reduce(GroupKind::data_replica, Collective::all_reduce,
                              dense_b / double(p.shard_ranks())) +
                       reduce(GroupKind::expert_data_replica, Collective::all_reduce,
                              expert_b / double(p.expert_shard_ranks()));
    }
    const ChunkCost& cost = x.cost.chunk(x.r, std::int32_t(chunk));
    out.lead_s = buckets ? cost.backward_input.total_s() + cost.backward_weight.total_s() : 0.0;
    if (zero >= 2) return out; // the passes reduce-scattered the shards: nothing waits
    if (!buckets) {
        out.last_bucket_s = out.total_s;
        return out;
    }
    // The buckets fill in reverse parameter order, so the last holds the chunk's first layers'
    // remainder and, in chunk 0, the embedding (a table larger than a bucket makes its bucket
    // larger).
    const double embedding =
        chunk == 0 && !x.params.units[0].empty() ? double(x.params.units[0][0].dense) : 0.0;
    const double bucket = x.bucket_bytes / x.grad_b, rest = dense - embedding;
    const double remainder = rest > bucket ? std::fmod(rest, bucket) : rest;
    const double last = embedding + (remainder > 0 ? remainder : std::min(rest, bucket));
    if (dense > 0)
        out.last_bucket_s =
            x.cost.collective_s(zero == 0 ? GroupKind::data_context : GroupKind::data_shard, x.r,
                                zero == 0 ? Collective::all_reduce : Collective::reduce_scatter,
                                std::min(last, dense) * x.grad_b);
    return out;
}

// The chunks' reductions on the data-parallel stream: each starts when its chunk's gradients
// are ready (its buckets up to its last backward earlier), no earlier than the stream is free,
// and ends no earlier than its last bucket after the chunk is done. `timing` gives when each
// chunk's gradients are ready and when the stage's pipeline work ends; without it (a bound
// before the pipeline is timed) the one reduction no chunk can avoid: the least of each
// chunk's own exposure. The hidden part slows the compute beside it by its SMs.
void reduce_gradients(const TailContext& x, const ChunkTiming* timing, StepTail& t) {
    const core::ParallelPlan& p = x.job.plan;
    std::vector<ChunkReduction> chunks;
    double total = 0.0;
    for (std::size_t c = 0; c < x.params.units.size(); ++c) {
        chunks.push_back(reduce_chunk(x, c));
        if (timing) chunks.back().ready_s = timing->grads_ready_s.at(c);
        total += chunks.back().total_s;
    }
    if (!p.overlap_grad_reduce) {
        t.gradient_reduce_s = total;
        return;
    }
    double exposed = 0.0;
    if (timing) {
        std::sort(
            chunks.begin(), chunks.end(),
            [](const ChunkReduction& a, const ChunkReduction& b) { return a.ready_s < b.ready_s; });
        double free = -1e300;
        for (const ChunkReduction& c : chunks)
            free = std::max(std::max(free, c.ready_s - c.lead_s) + c.total_s,
                            c.ready_s + c.last_bucket_s);
        exposed = std::max(0.0, free - timing->pipeline_end_s);
    } else {
        exposed = chunks.empty() ? 0.0 : 1e300;
        for (const ChunkReduction& c : chunks)
            exposed = std::min(exposed, std::max(c.last_bucket_s, c.total_s - c.lead_s));
    }
    exposed = std::min(exposed, total);
    const GroupKind reduced_over =
        p.zero_stage() == 0 ? GroupKind::data_context : GroupKind::data_shard;
    t.contention_s += std::max(0.0, total - exposed) * x.cost.overlap_slowdown(reduced_over, x.r);
    t.gradient_reduce_s = exposed;
}

// AdamW over the local shard: reads fp32 master, grad, m, v; writes master, m, v and the bf16
// weights (30 bytes per parameter with fp32 state); the global gradient norm (one scalar
// all-reduce across the model); and the once-a-step FP8 weight cast.
double optimizer_step_s(const TailContext& x) {
    const core::ParallelPlan& p = x.job.plan;
    const StageParameters& params = x.params;
    const double local = optimizer_parameters(params, p);
    const double state_b = core::optimizer_state_bytes_per_parameter(x.job.model.precision);
    double s = x.cost.memory_bound_s(core::MemoryKernel::adamw,
                                     local * (x.grad_b + 2.0 * state_b + x.param_b));
    s += x.cost.collective_s(GroupKind::model, x.r, Collective::all_reduce, 4.0);
    // FP8 weights are cast once a step, after the update (Transformer Engine caches them over
    // the micro-batches): cast and transpose from the 16-bit weight, or — with the FP8
    // parameter gather, where the optimizer writes the FP8 weight itself — the transpose alone.
    // (ZeRO-3 casts each gathered unit in its passes instead.)
    if (p.fp8.enabled() && params.fp8 > 0 && p.zero_stage() < 3)
        s += x.cost.memory_bound_s(core::MemoryKernel::elementwise,
                                   fp8_weight_cast_bytes(p.fp8, params.fp8));
    return s;
}

// ZeRO-1/2 gather the updated parameters back from the shards (ZeRO-3 keeps them sharded:
// each pass gathers its units); overlapped with the next step's first forward, only the rest
// shows, and the hidden part slows that forward by its SMs.
void gather_parameters(const TailContext& x, StepTail& t) {
    const core::ParallelPlan& p = x.job.plan;
    const StageParameters& params = x.params;
    if (p.zero_stage() != 1 && p.zero_stage() != 2) return;
    // The stage's FP8 weights shared between dense and expert in proportion.
    const double fp8_share = params.total() > 0 ? params.fp8 / params.total() : 0.0;
    const auto gathered = [&](double parameters) {
        return gathered_weight_bytes(parameters, parameters * fp8_share, x.param_b, p.fp8);
    };
    t.parameter_gather_s =
        bucketed(x.cost, GroupKind::data_shard, x.r, Collective::all_gather, gathered(params.dense),
                 x.bucket_bytes) +
        bucketed(x.cost, GroupKind::expert_data_shard, x.r, Collective::all_gather,
                 gathered(params.expert), x.bucket_bytes);
    if (!p.overlap_param_gather) return;
    const double hidden = std::min(t.parameter_gather_s, x.cost.chunk(x.r, 0).forward.total_s());
    t.contention_s += hidden * x.cost.overlap_slowdown(GroupKind::data_shard, x.r);
    t.parameter_gather_s -= hidden;
}

} // namespace

StepTail step_tail(const core::JobSpec& job, const CostModel& cost, std::int32_t r,
                   double bucket_parameters, const ChunkTiming* timing) {
    const core::ParallelPlan& p = job.plan;
    const core::Precision& prec = job.model.precision;
    const double grad_b = double(core::dtype_bytes(prec.grads));
    const TailContext x{job,
                        cost,
                        r,
                        cost.parameters(r),
                        grad_b,
                        double(core::dtype_bytes(prec.params)),
                        (bucket_parameters > 0 ? bucket_parameters
                                               : double(core::ddp_bucket_elements(p.dp * p.cp))) *
                            grad_b};
    StepTail t;
    reduce_gradients(x, timing, t);
    // Tied embeddings across stages: first and last stage sum their embedding gradients
    // (V-shaped schedules hold both on rank 0, which adds them locally).
    if (job.model.tied_embeddings && p.pp > 1 && (r == 0 || r == p.pp - 1) &&
        core::placement_of(p.schedule) != core::StagePlacement::v_shape)
        t.embedding_sync_s =
            cost.collective_s(GroupKind::embedding, r, Collective::all_reduce,
                              double(job.model.padded_vocab_size(p.tp)) *
                                  double(job.model.hidden_size) / double(p.tp) * grad_b);
    // DualPipe: this rank's copy-1 chunk is stage p − 1 − r, whose copy-0 twin lives on rank
    // p − 1 − r; the two swap those gradients and sum them (DeepSeek-AI 2024, §3.2.1).
    if (core::placement_of(p.schedule) == core::StagePlacement::two_copies && p.pp > 1)
        t.copy_sync_s = cost.send_recv_s(r, std::int32_t(p.pp) - 1 - r,
                                         cost.parameters(r).chunk_total(1) * grad_b);
    t.optimizer_s = optimizer_step_s(x);
    gather_parameters(x, t);
    return t;
}

namespace {

// The pipeline's discrete-event run: each compute action at its chunk's cost, each message at
// its stage pair's transfer time (computed once: the event loop asks for every message).
PipelineTimeline time_pipeline(const core::ParallelPlan& p, const CostModel& cost,
                               const core::Schedule& schedule, const MoeOverlap& moe, bool trace) {
    std::vector<double> p2p(std::size_t(p.pp * p.pp), 0.0);
    for (std::int32_t a = 0; a < p.pp; ++a)
        for (std::int32_t b = 0; b < p.pp; ++b)
            if (a != b && (std::abs(a - b) == 1 || std::abs(a - b) == p.pp - 1))
                p2p[std::size_t(a * p.pp + b)] = cost.p2p_s(a, b);
    return time_schedule(
        schedule,
        [&](std::int32_t r, const core::Action& a) {
            const std::size_t i = std::size_t(&a - schedule.ranks[std::size_t(r)].data());
            return moe.pass_s(cost, r, i, a);
        },
        [&](std::int32_t from, std::int32_t to, const core::Action&) {
            return p2p[std::size_t(from * p.pp + to)];
        },
        trace, !p.p2p_overlapped());
}

// Stage r's times over the step: its passes' compute, recomputation and collectives, the end
// of its pipeline work, and the step's tail (data-parallel sync, optimizer), traced after it.
StageReport stage_report(const core::JobSpec& job, const core::PipelineSplit& split,
                         const CostModel& cost, const PipelineTimeline& timeline,
                         const MoeOverlap& moe, const SimulateOptions& options, std::int32_t r,
                         Report& report) {
    const core::Precision& prec = job.model.precision;
    StageReport s;
    s.stage = r;
    s.representative_rank = cost.representative(r);
    for (std::int32_t c = 0; c < job.plan.vpp; ++c)
        s.layers += split.layers_of(
            core::virtual_stage(job.plan.schedule, c, std::int32_t(job.plan.pp), r));
    const double m = double(job.plan.chunk_microbatches(report.microbatches));
    for (std::int32_t c = 0; c < job.plan.vpp; ++c) {
        const ChunkCost& cc = cost.chunk(r, c);
        for (const PassCost* pc : {&cc.forward, &cc.backward_input, &cc.backward_weight}) {
            s.compute_s += pc->compute_s * m;
            s.recompute_s += pc->recompute_s * m;
            s.collective_s += pc->collective_s * m;
            s.gemm_s += pc->gemm_s * m;
            s.fp8_gemm_s += pc->fp8_gemm_s * m;
            s.fp8_cast_s += pc->fp8_cast_s * m;
            s.sharding_s += pc->sharding_s * m;
            s.sharding_stream_s += pc->sharding_stream_s * m;
            s.tp_collective_s += pc->tp_collective_s * m;
            s.tp_hidden_s += pc->tp_hidden_s * m;
            s.contention_s += pc->contention_s * m;
            s.kernels += pc->kernels * m;
            s.host_s += pc->host_s * m;
            s.moe_exchange_s += pc->moe_exchange_s * m;
            s.moe_hidden_s += pc->moe_hidden_s * m; // under the shared experts
        }
    }
    // The exchange the merged forward-backward pairs hid, and the SMs it took from them.
    const double paired_hidden_s = moe.hidden_total_s(r);
    s.moe_hidden_s += paired_hidden_s;
    s.collective_s -= paired_hidden_s;
    if (!moe.slowdown.empty()) s.contention_s += paired_hidden_s * moe.slowdown[std::size_t(r)];
    s.pipeline_end_s = timeline.end_s[std::size_t(r)];
    ChunkTiming timing{{}, timeline.end_s[std::size_t(r)]};
    for (std::int32_t c = 0; c < job.plan.vpp; ++c)
        timing.grads_ready_s.push_back(timeline.grads_ready_s[std::size_t(r * job.plan.vpp + c)]);
    const StepTail tail = step_tail(job, cost, r, options.bucket_parameters, &timing);
    s.optimizer_s = tail.optimizer_s;
    s.data_parallel_s = tail.gradient_reduce_s + tail.embedding_sync_s + tail.copy_sync_s +
                        tail.parameter_gather_s + tail.contention_s;
    if (!options.trace) return s;
    const StageParameters& params = cost.parameters(r);
    double t = s.pipeline_end_s;
    const auto add = [&](core::Stream stream, core::EventKind kind, double seconds, double bytes) {
        if (seconds <= 0) return;
        report.trace.events.push_back({std::int32_t(s.representative_rank), stream, kind, -1, -1, t,
                                       t + seconds, bytes, 0.0, r});
        t += seconds;
    };
    add(core::Stream::data_parallel, core::EventKind::gradient_reduce,
        tail.gradient_reduce_s + tail.embedding_sync_s + tail.copy_sync_s,
        params.total() * double(core::dtype_bytes(prec.grads)));
    add(core::Stream::compute, core::EventKind::optimizer, s.optimizer_s, 0.0);
    add(core::Stream::data_parallel, core::EventKind::parameter_gather, tail.parameter_gather_s,
        params.total() * double(core::dtype_bytes(prec.params)));
    return s;
}

// The trace: the pipeline events on each stage's representative rank, with their bytes and
// FLOPs; recomputation split off the front of each B as its own block, appended after them (a
// trace is not ordered); then the step tails `report` already holds.
void build_trace(const core::JobSpec& job, const CostModel& cost, PipelineTimeline& timeline,
                 Report& report) {
    report.trace.source = "simulated";
    report.trace.plan = core::to_json(job);
    std::vector<core::TraceEvent> tail_events = std::move(report.trace.events);
    report.trace.events = std::move(timeline.events);
    std::vector<core::TraceEvent>& events = report.trace.events;
    const std::size_t pipeline_events = events.size();
    for (std::size_t i = 0; i < pipeline_events; ++i) {
        core::TraceEvent& e = events[i];
        e.rank = std::int32_t(cost.representative(e.stage)); // the timeline's rank is the stage
        if (e.stream != core::Stream::compute) {
            e.bytes = cost.p2p_bytes();
            continue;
        }
        const core::ActionKind kind = e.kind == core::EventKind::forward ? core::ActionKind::forward
                                      : e.kind == core::EventKind::backward_input
                                          ? core::ActionKind::backward_input
                                          : core::ActionKind::backward_weight;
        const PassCost& pc = cost.chunk(e.stage, e.chunk).of(kind);
        e.flops = pc.flops;
        if (pc.recompute_s > 0) {
            core::TraceEvent again = e;
            again.kind = core::EventKind::recompute;
            again.end_s = e.start_s + pc.recompute_s;
            e.start_s = again.end_s;
            events.push_back(again);
        }
    }
    events.insert(events.end(), tail_events.begin(), tail_events.end());
}

} // namespace

Report simulate(const core::JobSpec& job, const core::Profile& profile,
                const SimulateOptions& options) {
    const core::ParallelPlan& p = job.plan;
    Report report;
    report.job = job;
    report.profile_name = profile.name();
    report.profile_kind = profile.provenance().kind;
    report.microbatches = std::int32_t(job.micro_batches_per_step());
    report.peak_flops_per_s = profile.peak_flops_per_s(job.model.precision.params);
    report.memory_capacity_bytes = profile.memory_bytes();
    report.host_op_issue_s = profile.host_op_issue_s();

    const core::Schedule schedule = core::make_schedule(p.schedule, std::int32_t(p.pp),
                                                        std::int32_t(p.vpp), report.microbatches);
    const CostModel cost(job, profile, options.parameters, options.layer_costs);
    const MoeOverlap moe = moe_overlap(job, schedule, cost);
    PipelineTimeline timeline = time_pipeline(p, cost, schedule, moe, options.trace);
    std::vector<core::InFlight> flights;
    if (!options.in_flight) flights = in_flight_per_rank(schedule);
    std::vector<StageParameters> parameters;
    for (std::int32_t r = 0; r < p.pp; ++r) parameters.push_back(cost.parameters(r));
    const auto memory =
        memory_per_stage(job, options.in_flight ? *options.in_flight : flights, &parameters);
    const core::PipelineSplit split = job.pipeline_split();
    for (std::int32_t r = 0; r < p.pp; ++r) {
        report.stages.push_back(stage_report(job, split, cost, timeline, moe, options, r, report));
        report.stages.back().memory = memory[std::size_t(r)];
    }
    for (const StageReport& s : report.stages)
        report.step_time_s =
            std::max(report.step_time_s, s.pipeline_end_s + s.data_parallel_s + s.optimizer_s);
    for (StageReport& s : report.stages)
        s.bubble_s = core::idle_seconds(report.step_time_s, s.busy_s());

    const StepFlops flops = step_flops(job);
    const double devices = double(job.cluster.devices());
    report.model_flops = flops.model;
    report.hardware_flops = flops.hardware;
    report.tokens_per_s = double(job.training.tokens_per_step()) / report.step_time_s;
    report.tflops_per_device =
        core::flops_per_device_s(flops.model, report.step_time_s, devices) / 1e12;
    report.mfu =
        core::flops_utilization(flops.model, report.step_time_s, devices, report.peak_flops_per_s);
    report.hfu = core::flops_utilization(flops.hardware, report.step_time_s, devices,
                                         report.peak_flops_per_s);
    if (p.fp8.enabled())
        report.mfu_fp8_peak =
            core::flops_utilization(flops.model, report.step_time_s, devices,
                                    profile.peak_flops_per_s(core::quantized_dtype(p.fp8.recipe)));
    if (options.trace) build_trace(job, cost, timeline, report);
    report.fallbacks = cost.fallbacks();
    return report;
}

} // namespace trident::simulator
