#include "trident/executor/trainer.h"

#include "host_memory.h"
#include "trident/core/hash.h"
#include "trident/core/parameter_count.h"
#include "trident/core/spec_error.h"
#include "trident/core/units.h"
#include "trident/executor/mpi.h"
#include "trident/kernels/cpu.h"

#include <chrono>
#include <climits>
#include <cmath>
#include <cstdio>
#include <fstream>

namespace trident::executor {

using Clock = std::chrono::steady_clock;

void require_supported(const core::JobSpec& job) {
    const core::ParallelPlan& p = job.plan;
    const auto no = [](const std::string& field, const std::string& what) {
        throw core::SpecError(field, what + " is not run by the CPU executor yet");
    };
    if (job.model.moe) {
        const core::MoeSpec& e = *job.model.moe;
        if (p.tp > 1) no("parallel.tp", "tensor parallelism with mixture of experts");
        if (p.distributed_optimizer)
            no("parallel.distributed_optimizer",
               "the distributed optimizer with mixture of experts");
        if (e.shared_expert_ffn_hidden_size > 0)
            no("model.moe.shared_expert_ffn_hidden_size", "shared experts");
    }
    if (job.model.mla) no("model.mla", "multi-head latent attention");
}

std::vector<std::string> ignored_by_executor(const core::JobSpec& job, bool cuda_backend) {
    std::vector<std::string> ignored;
    if (job.model.dropout && cuda_backend)
        ignored.push_back("model.dropout: dropout is not applied by the CUDA backend yet (the CPU "
                          "backend applies it); this run trains without it");
    return ignored;
}

void synthetic_sequence(std::uint64_t seed, std::int64_t sample, std::int64_t length,
                        std::int64_t vocab, std::int32_t* out) {
    std::uint64_t state =
        (seed ^ core::kSplitmixIncrement) + std::uint64_t(sample) * 0xBF58476D1CE4E5B9ull;
    const auto next = [&] {
        const std::uint64_t r = core::splitmix64(state);
        state += core::kSplitmixIncrement;
        return r;
    };
    std::int64_t token = std::int64_t(next() % std::uint64_t(vocab));
    for (std::int64_t i = 0; i < length; ++i) {
        out[i] = std::int32_t(token);
        // Next token: 5·t + 3 plus a coin flip, so the best loss is about ln 2.
        token = (5 * token + 3 + std::int64_t(next() & 1)) % vocab;
    }
}

OptimizerShard optimizer_shard(const ParameterStore& store, bool distributed, std::int64_t dp,
                               std::int64_t dp_rank, std::int64_t tp_rank) {
    OptimizerShard s;
    const std::int64_t total = std::int64_t(store.values.size());
    s.padded_size = distributed ? (total + dp - 1) / dp * dp : total;
    s.size = distributed ? s.padded_size / dp : s.padded_size;
    s.begin = distributed ? dp_rank * s.size : 0;
    // Runs of equal treatment within this rank's shard, from the tensors that overlap it.
    for (const auto& t : store.tensors) {
        const std::int64_t begin = std::max(t.offset, s.begin) - s.begin;
        const std::int64_t end = std::min(t.offset + t.size, s.begin + s.size) - s.begin;
        if (begin >= end) continue;
        if (s.decay_runs.empty() || s.decay_runs.back().flag != t.decay ||
            s.decay_runs.back().end != begin)
            s.decay_runs.push_back({begin, end, t.decay});
        else
            s.decay_runs.back().end = end;
        // Each parameter counts once in the global norm: replicated tensors on tensor rank 0,
        // and never the last stage's copy of a tied embedding.
        if (!t.duplicate && (!t.tp_replicated || tp_rank == 0))
            s.norm_runs.push_back({begin, end, t.expert});
    }
    return s;
}

double rank_parameters_estimate(const core::JobSpec& job) {
    const core::ParameterCounts c = core::count_parameters(job.model);
    const core::ParallelPlan& p = job.plan;
    const double dense_layers = double(c.layers_total - c.routed_experts);
    return dense_layers / double(p.tp * p.pp) + double(c.routed_experts) / double(p.ep * p.pp) +
           double(std::max(c.word_embedding, c.output_layer)) / double(p.tp) +
           double(c.position_embedding);
}

void require_host_memory(const core::JobSpec& job, double bytes_per_parameter,
                         const std::string& what) {
    const int local_ranks = node_place().ranks;
    const double per_rank = rank_parameters_estimate(job) * bytes_per_parameter;
    const double available = meminfo_bytes("MemAvailable"); // negative: unknown, no check
    if (on_every_rank(available < 0.0 || per_rank * local_ranks <= available)) return;
    throw core::SpecError("model", "needs about " + core::bytes_text(per_rank) + " per rank for " +
                                       what + " (" + std::to_string(local_ranks) + " rank" +
                                       (local_ranks == 1 ? "" : "s") +
                                       " on a node), more than the " + core::bytes_text(available) +
                                       " available; use more ranks or nodes");
}

std::optional<float> finish_gradient_norm(double squares, std::int64_t index,
                                          const core::TrainingSpec& t, StepStats& stats,
                                          std::int64_t& skipped) {
    stats.grad_norm = std::sqrt(squares);
    stats.lr = learning_rate(t.lr, index);
    if (!std::isfinite(stats.grad_norm)) {
        stats.skipped = true;
        ++skipped;
        return std::nullopt;
    }
    return t.clip_grad > 0 && stats.grad_norm > t.clip_grad
               ? float(t.clip_grad / (stats.grad_norm + 1e-6))
               : 1.0f;
}

double learning_rate(const core::LrSchedule& s, std::int64_t it) {
    if (s.warmup_iters > 0 && it < s.warmup_iters)
        return s.lr * double(it + 1) / double(s.warmup_iters);
    if (it >= s.decay_iters || s.decay_style == core::LrDecayStyle::constant)
        return s.decay_style == core::LrDecayStyle::constant ? s.lr : s.min_lr;
    const double ratio = double(it - s.warmup_iters) /
                         double(std::max<std::int64_t>(1, s.decay_iters - s.warmup_iters));
    const double coeff = s.decay_style == core::LrDecayStyle::linear
                             ? 1.0 - ratio
                             : 0.5 * (std::cos(M_PI * ratio) + 1.0);
    return s.min_lr + coeff * (s.lr - s.min_lr);
}

std::int64_t microbatch_first_sample(const core::JobSpec& job, std::int64_t dp_rank,
                                     std::int64_t first_sample, std::int32_t microbatch) {
    // Each data-parallel rank takes its contiguous part of the global batch.
    const std::int64_t b = job.plan.micro_batch_size, m = job.micro_batches_per_step();
    return first_sample + dp_rank * m * b + std::int64_t(microbatch) * b;
}

void microbatch_tokens(const core::JobSpec& job, std::int64_t dp_rank,
                       const std::vector<std::int32_t>& positions, const SampleSource& samples,
                       std::int64_t first_sample, std::int32_t microbatch,
                       std::vector<std::int32_t>& inputs, std::vector<std::int32_t>& targets) {
    const std::int64_t b = job.plan.micro_batch_size, T = job.training.seq_length;
    const std::int64_t local = std::int64_t(positions.size());
    inputs.resize(std::size_t(b * local));
    targets.resize(std::size_t(b * local));
    std::vector<std::int32_t> seq(std::size_t(T + 1));
    for (std::int64_t i = 0; i < b; ++i) {
        const std::int64_t sample =
            microbatch_first_sample(job, dp_rank, first_sample, microbatch) + i;
        samples(sample, seq.data());
        for (std::int64_t t = 0; t < local; ++t) {
            inputs[std::size_t(i * local + t)] = seq[std::size_t(positions[std::size_t(t)])];
            targets[std::size_t(i * local + t)] = seq[std::size_t(positions[std::size_t(t)] + 1)];
        }
    }
}

SampleSource synthetic_samples(const core::JobSpec& job, std::uint64_t seed) {
    const std::int64_t vocab = job.model.vocab_size;
    const std::int64_t length = job.training.seq_length + 1;
    return [seed, vocab, length](std::int64_t index, std::int32_t* tokens) {
        synthetic_sequence(seed, index, length, vocab, tokens);
    };
}

CpuTrainer::CpuTrainer(const core::JobSpec& job, ProcessGroups& groups, std::uint64_t seed,
                       SampleSource samples)
    : job_(job), groups_(groups), seed_(seed),
      samples_(samples ? std::move(samples) : synthetic_samples(job, seed)),
      schedule_(core::make_schedule(job.plan.schedule, std::int32_t(job.plan.pp),
                                    std::int32_t(job.plan.vpp),
                                    std::int32_t(job.micro_batches_per_step()))) {
    require_supported(job);
    // fp32 parameters and gradients, and Adam's two moments (over 1/dp with ZeRO-1).
    const double moments = job.plan.distributed_optimizer ? 8.0 / double(job.plan.dp) : 8.0;
    require_host_memory(job, 8.0 + moments, "fp32 parameters, gradients and Adam state");
    const std::int32_t pp_rank = std::int32_t(groups.coord.pp);
    for (std::int32_t c = 0; c < job.plan.vpp; ++c)
        chunks_.emplace_back(job, pp_rank, c, int(groups.coord.tp), int(groups.coord.ep),
                             int(groups.coord.cp), store_, seed);
    shard_ = optimizer_shard(store_, job.plan.distributed_optimizer, groups.data->size(),
                             groups.data->rank(), groups.coord.tp);
    store_.values.resize(std::size_t(shard_.padded_size), 0.0f);
    store_.grads.resize(std::size_t(shard_.padded_size), 0.0f);
    adam_m_.assign(std::size_t(shard_.size), 0.0f);
    adam_v_.assign(std::size_t(shard_.size), 0.0f);
    int* tag_limit = nullptr;
    int found = 0;
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &tag_limit, &found);
    const std::int64_t tags = 2 * std::int64_t(schedule_.virtual_stages()) * schedule_.microbatches;
    if (found && tag_limit && tags > *tag_limit)
        throw core::SpecError("training.global_batch_size",
                              "needs more MPI message tags than the MPI library offers");
}

namespace {

// What one (micro-batch, chunk) holds while the schedule walk runs.
struct Slot {
    GptChunk::Activations acts;
    std::vector<std::int32_t> inputs, targets;
    Vec received_activation, received_gradient;
};
using Slots = std::map<std::pair<std::int32_t, std::int32_t>, Slot>;

// The activations every live (micro-batch, chunk) holds; after a B, also the most its own
// micro-batch held inside it (the others did not change meanwhile).
double held_bytes(const Slots& slots, const core::Action& a, const Slot& slot) {
    double live = 0.0;
    for (const auto& [key, s] : slots) live += s.acts.bytes();
    if (a.kind != core::ActionKind::backward_input) return live; // (B never erases its slot)
    return std::max(live, live - slot.acts.bytes() + slot.acts.peak_bytes);
}

// The trace event of action `a`, run from t0 to t1. A fused backward is traced as the
// schedule names it, B then W, split at the `fused_weight_s` its weight gradients took.
core::TraceEvent action_event(int world_rank, core::Stream stream, const core::Action& a, double t0,
                              double t1, double p2p_bytes, double fused_weight_s,
                              const std::vector<core::TraceEvent>& before) {
    if (fused_weight_s > 0.0 && a.kind == core::ActionKind::backward_input) t1 -= fused_weight_s;
    if (fused_weight_s > 0.0 && a.kind == core::ActionKind::backward_weight) {
        t0 = before.back().end_s;
        t1 = t0 + fused_weight_s;
    }
    return {world_rank,
            stream,
            core::to_event_kind(a.kind),
            a.microbatch,
            a.chunk,
            t0,
            t1,
            core::is_compute(a.kind) ? 0.0 : p2p_bytes,
            0.0};
}

} // namespace

void CpuTrainer::run_schedule(const SampleSource& samples, std::int64_t first_sample,
                              bool forward_only, StepStats& stats,
                              std::vector<core::TraceEvent>* trace) {
    const std::int32_t pp_rank = std::int32_t(groups_.coord.pp);
    const std::int32_t m = schedule_.microbatches;
    const float loss_scale = 1.0f / float(m * job_.plan.dp); // the cp ranks' shares already add up
    Slots slots;
    const ChunkComms comms{*groups_.tensor, *groups_.expert, *groups_.context};
    const auto tag = [&](std::int32_t receiver_vs, std::int32_t mb, bool gradient) {
        return (receiver_vs * m + mb) * 2 + (gradient ? 1 : 0);
    };
    // A traced step starts from a barrier, so every rank's clock has the same origin (within
    // the barrier's exit spread) and sends line up with their receives on the timeline.
    if (trace) groups_.world->barrier();
    const auto start = Clock::now();
    const auto now = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };
    double loss_sum = 0.0;
    const std::vector<core::Action>& actions = schedule_.ranks[std::size_t(pp_rank)];
    double fused_weight_s = 0.0; // the W a fused backward just ran: its share of the B's time
    for (std::size_t index = 0; index < actions.size(); ++index) {
        const core::Action& a = actions[index];
        // Evaluation walks the forward half of the same schedule: forwards never wait on a
        // backward, so the subsequence keeps the schedule's deadlock-free order.
        if (forward_only && a.kind != core::ActionKind::forward &&
            a.kind != core::ActionKind::send_activation &&
            a.kind != core::ActionKind::recv_activation)
            continue;
        const double t0 = now();
        Slot& slot = slots[{a.microbatch, a.chunk}];
        const GptChunk& chunk = chunks_[std::size_t(a.chunk)];
        const std::int32_t vs = schedule_.virtual_stage(pp_rank, a.chunk);
        const std::size_t hidden = std::size_t(chunk.hidden_elements());
        core::Stream stream = core::Stream::pipeline_p2p;
        switch (a.kind) {
        case core::ActionKind::forward:
            stream = core::Stream::compute;
            microbatch_tokens(job_, groups_.coord.dp, chunks_.front().local_positions(), samples,
                              first_sample, a.microbatch, slot.inputs, slot.targets);
            slot.acts.tokens = slot.inputs.data();
            slot.acts.targets = slot.targets.data();
            // Dropout masks are keyed by the global sample, as microbatch_tokens reads it.
            slot.acts.first_sample =
                microbatch_first_sample(job_, groups_.coord.dp, first_sample, a.microbatch);
            slot.acts.training = !forward_only;
            if (!chunk.first()) slot.acts.input = std::move(slot.received_activation);
            chunk.forward(slot.acts, comms);
            if (chunk.last()) loss_sum += slot.acts.loss;
            if (forward_only && chunk.last()) slots.erase({a.microbatch, a.chunk});
            break;
        case core::ActionKind::backward_input: {
            stream = core::Stream::compute;
            const float* dout = chunk.last() ? nullptr : slot.received_gradient.data();
            if (core::fuses_backward(schedule_, pp_rank, index)) {
                chunk.backward(slot.acts, dout, loss_scale, comms); // W too: the next action
                fused_weight_s = slot.acts.weight_gradient_s;
            } else {
                chunk.backward_input(slot.acts, dout, loss_scale, comms);
            }
            Vec().swap(slot.received_gradient);
            break;
        }
        case core::ActionKind::backward_weight:
            stream = core::Stream::compute;
            if (!(index > 0 && core::fuses_backward(schedule_, pp_rank, index - 1)))
                chunk.backward_weight(slot.acts);
            break;
        case core::ActionKind::send_activation:
            groups_.pipeline->send(slot.acts.output.data(), hidden, a.peer,
                                   tag(vs + 1, a.microbatch, false));
            Vec().swap(slot.acts.output);
            if (forward_only) slots.erase({a.microbatch, a.chunk}); // sends copy their buffer
            break;
        case core::ActionKind::recv_activation:
            slot.received_activation.resize(hidden);
            groups_.pipeline->recv(slot.received_activation.data(), hidden, a.peer,
                                   tag(vs, a.microbatch, false));
            break;
        case core::ActionKind::send_gradient:
            groups_.pipeline->send(slot.acts.dinput.data(), hidden, a.peer,
                                   tag(vs - 1, a.microbatch, true));
            Vec().swap(slot.acts.dinput);
            break;
        case core::ActionKind::recv_gradient:
            slot.received_gradient.resize(hidden);
            groups_.pipeline->recv(slot.received_gradient.data(), hidden, a.peer,
                                   tag(vs, a.microbatch, true));
            break;
        }
        if (trace)
            trace->push_back(action_event(groups_.world_rank, stream, a, t0, now(),
                                          double(hidden) * sizeof(float), fused_weight_s, *trace));
        if (a.kind == core::ActionKind::backward_weight) { // W done: only B's output may remain
            fused_weight_s = 0.0;
            Vec dinput = std::move(slot.acts.dinput);
            slot.acts = GptChunk::Activations{};
            slot.acts.dinput = std::move(dinput);
        }
        stats.peak_activation_bytes =
            std::max(stats.peak_activation_bytes, held_bytes(slots, a, slot));
    }
    groups_.pipeline->wait_sends();
    // The step's loss: the last stage's tensor rank 0 of every data rank contributes its mean.
    float contribution = 0.0f;
    if (chunks_.back().last() && groups_.coord.tp == 0)
        contribution = float(loss_sum / double(m) / double(job_.plan.dp));
    groups_.world->all_reduce_sum(&contribution, 1);
    stats.loss = contribution;
}

double CpuTrainer::reduce_and_update(std::int64_t index, StepStats& stats) {
    const core::ParallelPlan& p = job_.plan;
    const core::TrainingSpec& t = job_.training;
    float* grads = store_.grads.data();
    // Tied embeddings on two stages: both copies take the summed gradient.
    if (groups_.embedding && job_.model.tied_embeddings && p.pp > 1)
        for (const auto& tensor : store_.tensors)
            if (tensor.name == "embedding.word" || tensor.name == "embedding.word.tied_copy")
                groups_.embedding->all_reduce_sum(grads + tensor.offset, std::size_t(tensor.size));
    // Sequence parallelism leaves each tensor rank the norm gradients of its rows only.
    if (p.sequence_parallel)
        for (const auto& tensor : store_.tensors)
            if (tensor.sequence_partial)
                groups_.tensor->all_reduce_sum(grads + tensor.offset, std::size_t(tensor.size));
    // Data parallelism: gradients summed over the data ranks, in buckets (Megatron's DDP), or
    // reduce-scattered so each rank gets the sum over its shard (distributed optimizer).
    Communicator& data = *groups_.data;
    Vec shard_grads;
    float* g = grads;
    if (p.distributed_optimizer) {
        shard_grads.resize(std::size_t(shard_.size));
        data.reduce_scatter_sum(grads, shard_grads.data(), std::size_t(shard_.size));
        g = shard_grads.data();
    } else {
        // Dense tensors over the data ranks, in buckets; routed experts' over the ranks holding
        // the same experts (the expert-data group).
        constexpr std::int64_t kBucket = 1 << 20;
        std::int64_t begin = 0;
        const auto flush = [&](std::int64_t end) {
            for (std::int64_t at = begin; at < end; at += kBucket)
                data.all_reduce_sum(grads + at, std::size_t(std::min(kBucket, end - at)));
        };
        for (const auto& tensor : store_.tensors)
            if (tensor.expert) {
                flush(tensor.offset);
                groups_.expert_data->all_reduce_sum(grads + tensor.offset,
                                                    std::size_t(tensor.size));
                begin = tensor.offset + tensor.size;
            }
        flush(shard_.padded_size);
    }
    // Global gradient norm: each parameter once (see norm_mask_), over data ranks when sharded
    // and over the tensor and pipeline ranks of the model.
    double dense = 0.0, experts = 0.0; // in double: 10^8 squares would drown in float
    for (const OptimizerShard::Run& run : shard_.norm_runs) {
        double sum = 0.0;
        for (std::int64_t i = run.begin; i < run.end; ++i) sum += double(g[i]) * double(g[i]);
        (run.flag ? experts : dense) += sum;
    }
    float expert_squares = float(experts); // each expert lives on one rank of the expert group
    groups_.expert->all_reduce_sum(&expert_squares, 1);
    float squares = float(dense) + expert_squares;
    if (p.distributed_optimizer) data.all_reduce_sum(&squares, 1);
    groups_.model->all_reduce_sum(&squares, 1);
    const std::optional<float> clipping = finish_gradient_norm(squares, index, t, stats, skipped_);
    if (!clipping) return stats.grad_norm;
    const float clip = *clipping;
    float* params = store_.values.data() + shard_.begin;
    if (clip != 1.0f) // the gradients are rebuilt every step: scale them in place
        for (std::int64_t i = 0; i < shard_.size; ++i) g[i] *= clip;
    // AdamW with decay on matrices only: one call per run of equal decay in this shard
    // (padding beyond the last tensor is in no run and stays zero).
    for (const OptimizerShard::Run& run : shard_.decay_runs)
        kernels::cpu::adamw_update(params + run.begin, g + run.begin, adam_m_.data() + run.begin,
                                   adam_v_.data() + run.begin, run.end - run.begin, float(stats.lr),
                                   float(t.adam_beta1), float(t.adam_beta2), 1e-8f,
                                   run.flag ? float(t.weight_decay) : 0.0f, int(index + 1));
    if (p.distributed_optimizer) {
        Vec gathered(static_cast<std::size_t>(shard_.padded_size));
        data.all_gather(params, gathered.data(), std::size_t(shard_.size));
        store_.values = std::move(gathered);
    }
    return stats.grad_norm;
}

StepStats CpuTrainer::step(std::int64_t index, std::vector<core::TraceEvent>* trace) {
    const auto start = Clock::now();
    StepStats stats;
    stats.step = index;
    std::fill(store_.grads.begin(), store_.grads.end(), 0.0f);
    run_schedule(samples_, index * job_.training.global_batch_size, false, stats, trace);
    reduce_and_update(index, stats);
    stats.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    return stats;
}

double CpuTrainer::evaluate(const SampleSource& samples, std::int64_t first_sample) {
    StepStats stats;
    run_schedule(samples, first_sample, true, stats, nullptr);
    return stats.loss;
}

TrainerState CpuTrainer::state() {
    return {store_.values, adam_m_, adam_v_, shard_.begin, &skipped_, &store_};
}

} // namespace trident::executor
