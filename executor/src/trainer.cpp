#include "trident/executor/trainer.h"

#include "fp8_numerics.h"
#include "fsdp_units.h"
#include "host_memory.h"
#include "model_copies.h"
#include "partial_sums.h"
#include "schedule_walk.h"
#include "sharded_sets.h"
#include "trident/core/hash.h"
#include "trident/core/model_layout.h"
#include "trident/core/spec_error.h"
#include "trident/core/step_numbers.h"
#include "trident/core/units.h"
#include "trident/executor/gradient_buckets.h"
#include "trident/executor/mpi.h"
#include "trident/kernels/cpu.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdio>
#include <fstream>

namespace trident::executor {

using Clock = std::chrono::steady_clock;

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
    s.owned = {{s.begin, s.size}};
    add_optimizer_runs(store, tp_rank, s);
    return s;
}

void add_optimizer_runs(const ParameterStore& store, std::int64_t tp_rank, OptimizerShard& s,
                        std::int64_t etp_rank) {
    if (etp_rank < 0) etp_rank = tp_rank;
    // Runs of equal treatment within this rank's owned elements, from the tensors that overlap
    // each owned run; a run continues only where both the owned order and the flat buffer do.
    const auto extend = [](std::vector<OptimizerShard::Run>& runs, OptimizerShard::Run r) {
        if (!runs.empty() && runs.back().flag == r.flag && runs.back().end == r.begin &&
            runs.back().flat + (runs.back().end - runs.back().begin) == r.flat)
            runs.back().end = r.end;
        else
            runs.push_back(r);
    };
    std::int64_t at = 0; // owned position of the current run's start
    for (const FlatRun& own : s.owned) {
        for (const auto& t : store.tensors) {
            const std::int64_t begin = std::max(t.offset, own.begin);
            const std::int64_t end = std::min(t.offset + t.size, own.begin + own.length);
            if (begin >= end) continue;
            const OptimizerShard::Run piece{at + begin - own.begin, at + end - own.begin, false,
                                            begin};
            extend(s.decay_runs, {piece.begin, piece.end, t.decay, piece.flat});
            // Each parameter counts once in the global norm: replicated tensors on tensor
            // rank 0 (an expert's on expert-tensor rank 0), and never a copy kept in sync (a
            // tied embedding's, DualPipe's chunk 1).
            if (!t.duplicate && (!t.tp_replicated || (t.expert ? etp_rank : tp_rank) == 0))
                s.norm_runs.push_back({piece.begin, piece.end, t.expert, piece.flat});
        }
        at += own.length;
    }
}

std::int64_t optimizer_shards(const core::ParallelPlan& plan) {
    return plan.distributed_optimizer ? plan.shard_ranks() : 1;
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
      walk_(std::make_unique<ScheduleWalk>(
          core::make_schedule(job.plan.schedule, std::int32_t(job.plan.pp),
                              std::int32_t(job.plan.vpp),
                              std::int32_t(job.micro_batches_per_step())),
          std::int32_t(groups.coord.pp))) {
    require_supported(job);
    // fp32 parameters and gradients, and Adam's two moments (sharded over the data and context
    // ranks with the distributed optimizer, as optimizer_shard() does).
    const double state_bytes =
        core::state_bytes_per_parameter(core::cpu_executor_precision(), optimizer_shards(job.plan));
    require_host_memory(job, state_bytes, "fp32 parameters, gradients and Adam state");
    const std::int32_t pp_rank = std::int32_t(groups.coord.pp);
    std::size_t first_chunk1_tensor = 0;
    for (std::int32_t c = 0; c < job.plan.vpp; ++c) {
        if (c == 1) first_chunk1_tensor = store_.tensors.size();
        chunks_.emplace_back(job, pp_rank, c, int(groups.coord.tp), int(groups.coord.ep),
                             int(groups.coord.cp), store_, seed, int(groups.coord.etp));
    }
    for (GptChunk& c : chunks_)
        if (c.needs_mtp_table())
            for (const GptChunk& other : chunks_)
                if (other.first()) c.share_mtp_table(other);
    if (job.plan.fp8.enabled()) {
        std::vector<std::int32_t> layers;
        std::vector<std::int64_t> first_layers;
        for (const GptChunk& c : chunks_) {
            layers.push_back(c.layer_count());
            first_layers.push_back(c.first_layer());
        }
        fp8_ =
            std::make_unique<Fp8Numerics>(job_, groups, std::move(layers), std::move(first_layers),
                                          std::int32_t(chunks_.front().local_experts()));
        for (GptChunk& c : chunks_) c.use_fp8(fp8_.get());
    }
    if (core::placement_of(job.plan.schedule) == core::StagePlacement::two_copies)
        twins_ = std::make_unique<DualPipeTwins>(store_, first_chunk1_tensor, *groups.pipeline,
                                                 pp_rank, job.plan.pp);
    // Adam state over everything, or (distributed optimizer) over this rank's slice of the
    // dense tensors (data × context group) and of the routed experts' (expert-data group).
    if (job.plan.zero_stage() >= 2) {
        // Pages go back to the kernel only where memory is short (FsdpUnits): not when the
        // node has room for every rank's whole state twice over.
        fsdp_ = std::make_unique<FsdpUnits>(job_, store_, chunks_, groups, sharded_sets_,
                                            !host_memory_holds(job, 2.0 * state_bytes));
        for (const ShardedSet& set : sharded_sets_) {
            for (const FlatRun& r : set.owned()) shard_.owned.push_back(r);
            shard_.size += set.owned_elements();
        }
    } else if (job.plan.distributed_optimizer) {
        sharded_sets_.push_back(
            sharded_set(store_, false, groups.data_shard->size(), groups.data_shard->rank()));
        if (job.model.moe)
            sharded_sets_.push_back(sharded_set(store_, true, groups.expert_data_shard->size(),
                                                groups.expert_data_shard->rank()));
        for (const ShardedSet& set : sharded_sets_) {
            for (const FlatRun& r : set.owned()) shard_.owned.push_back(r);
            shard_.size += set.owned_elements();
        }
    } else {
        shard_.size = std::int64_t(store_.values.size());
        shard_.owned = {{0, shard_.size}};
    }
    shard_.padded_size = std::int64_t(store_.values.size());
    add_optimizer_runs(store_, groups.coord.tp, shard_, groups.coord.etp);
    adam_m_.assign(std::size_t(shard_.size), 0.0f);
    adam_v_.assign(std::size_t(shard_.size), 0.0f);
    dense_buckets_ = std::make_unique<GradientBuckets>(
        store_, core::ddp_bucket_elements(groups.data->size()),
        [](const ParameterStore::Tensor& t) { return !t.expert; });
    int* tag_limit = nullptr;
    int found = 0;
    check_mpi(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &tag_limit, &found),
              "MPI_Comm_get_attr");
    const core::Schedule& schedule = walk_->schedule();
    const std::int64_t tags = 2 * std::int64_t(schedule.virtual_stages()) * schedule.microbatches;
    if (found && tag_limit && tags > *tag_limit)
        throw core::SpecError("training.global_batch_size",
                              "needs more MPI message tags than the MPI library offers");
}

namespace {

// What one (micro-batch, chunk) holds while the schedule walk runs.
struct CpuSlot {
    GptChunk::Activations acts;
    std::vector<std::int32_t> inputs, targets;
    Vec received_activation, received_gradient;
};

// The CPU backend's action bodies: fp32 chunks, MPI point-to-point with tags that name the
// receiving virtual stage, the micro-batch and the direction.
class CpuBodies final : public ActionBodies<CpuSlot> {
public:
    CpuBodies(const core::JobSpec& job, const ProcessGroups& groups,
              const std::vector<GptChunk>& chunks, const SampleSource& samples,
              std::int64_t first_sample, std::int32_t microbatches, FsdpUnits* fsdp)
        : job_(job), groups_(groups), chunks_(chunks), samples_(samples),
          first_sample_(first_sample),
          m_(microbatches), comms_{*groups.tensor,
                                   *groups.expert,
                                   *groups.context,
                                   *groups.expert_tensor,
                                   *groups.tensor_expert,
                                   fsdp && fsdp->shards_parameters() ? fsdp : nullptr},
          fsdp_(fsdp), loss_scale_(1.0f / float(microbatches * job.plan.dp)) {
    } // cp shares already add up

    double loss_sum() const { return loss_sum_; }
    const std::vector<double>& mtp_loss_sums() const { return mtp_sums_; }

    void forward(const WalkAction& w, CpuSlot& slot) override {
        const GptChunk& chunk = chunks_[std::size_t(w.action.chunk)];
        const std::int64_t dp_rank = groups_.coord.dp;
        microbatch_tokens(job_, dp_rank, chunks_.front().local_positions(), samples_, first_sample_,
                          w.action.microbatch, slot.inputs, slot.targets);
        slot.acts.tokens = slot.inputs.data();
        slot.acts.targets = slot.targets.data();
        // Dropout masks are keyed by the global sample, as microbatch_tokens reads it.
        slot.acts.first_sample =
            microbatch_first_sample(job_, dp_rank, first_sample_, w.action.microbatch);
        slot.acts.training = !w.forward_only;
        if (!chunk.first()) slot.acts.input = std::move(slot.received_activation);
        chunk.forward(slot.acts, comms_);
        if (chunk.last()) {
            loss_sum_ += slot.acts.loss;
            mtp_sums_.resize(std::max(mtp_sums_.size(), slot.acts.mtp.size()), 0.0);
            for (std::size_t d = 0; d < slot.acts.mtp.size(); ++d)
                mtp_sums_[d] += slot.acts.mtp[d].loss;
        }
    }
    double backward_input(const WalkAction& w, CpuSlot& slot) override {
        const GptChunk& chunk = chunks_[std::size_t(w.action.chunk)];
        const float* dout = chunk.last() ? nullptr : slot.received_gradient.data();
        double weight_s = 0.0;
        if (w.fused) { // W too: the next action
            chunk.backward(slot.acts, dout, loss_scale_, comms_);
            weight_s = slot.acts.weight_gradient_s;
            if (fsdp_) fsdp_->reduce_chunk(w.action.chunk);
        } else {
            chunk.backward_input(slot.acts, dout, loss_scale_, comms_);
        }
        Vec().swap(slot.received_gradient);
        return weight_s;
    }
    void backward_weight(const WalkAction& w, CpuSlot& slot) override {
        if (w.fused) return;
        chunks_[std::size_t(w.action.chunk)].backward_weight(slot.acts);
        if (fsdp_) fsdp_->reduce_chunk(w.action.chunk);
    }
    void send_activation(const WalkAction& w, CpuSlot& slot) override {
        groups_.pipeline->send(slot.acts.output.data(), hidden(w), w.action.peer,
                               tag(w.virtual_stage + 1, w.action.microbatch, false));
        Vec().swap(slot.acts.output);
    }
    void recv_activation(const WalkAction& w, CpuSlot& slot) override {
        slot.received_activation.resize(hidden(w));
        groups_.pipeline->recv(slot.received_activation.data(), hidden(w), w.action.peer,
                               tag(w.virtual_stage, w.action.microbatch, false));
    }
    void send_gradient(const WalkAction& w, CpuSlot& slot) override {
        groups_.pipeline->send(slot.acts.dinput.data(), hidden(w), w.action.peer,
                               tag(w.virtual_stage - 1, w.action.microbatch, true));
        Vec().swap(slot.acts.dinput);
    }
    void recv_gradient(const WalkAction& w, CpuSlot& slot) override {
        slot.received_gradient.resize(hidden(w));
        groups_.pipeline->recv(slot.received_gradient.data(), hidden(w), w.action.peer,
                               tag(w.virtual_stage, w.action.microbatch, true));
    }
    void hand_activation(CpuSlot& from, CpuSlot& to) override {
        to.received_activation = std::move(from.acts.output);
    }
    void hand_gradient(CpuSlot& from, CpuSlot& to) override {
        to.received_gradient = std::move(from.acts.dinput);
    }
    void keep_only_input_gradient(CpuSlot& slot) override {
        Vec dinput = std::move(slot.acts.dinput);
        slot.acts = GptChunk::Activations{};
        slot.acts.dinput = std::move(dinput);
    }
    void wait_sends() override { groups_.pipeline->wait_sends(); }
    double held_bytes(const CpuSlot& slot) const override { return slot.acts.bytes(); }
    double backward_peak_bytes(const CpuSlot& slot) const override { return slot.acts.peak_bytes; }
    double p2p_bytes(std::int32_t chunk) const override {
        return double(chunks_[std::size_t(chunk)].hidden_elements()) * sizeof(float);
    }

private:
    std::size_t hidden(const WalkAction& w) const {
        return std::size_t(chunks_[std::size_t(w.action.chunk)].hidden_elements());
    }
    int tag(std::int32_t receiver_vs, std::int32_t mb, bool gradient) const {
        return (receiver_vs * m_ + mb) * 2 + (gradient ? 1 : 0);
    }

    const core::JobSpec& job_;
    const ProcessGroups& groups_;
    const std::vector<GptChunk>& chunks_;
    const SampleSource& samples_;
    std::int64_t first_sample_;
    std::int32_t m_;
    ChunkComms comms_;
    FsdpUnits* fsdp_; // ZeRO-2/3: each chunk's gradients reduced every micro-batch
    float loss_scale_;
    double loss_sum_ = 0.0;
    std::vector<double> mtp_sums_; // per MTP module, over the micro-batches
};

} // namespace

void CpuTrainer::run_schedule(const SampleSource& samples, std::int64_t first_sample,
                              bool forward_only, StepStats& stats,
                              std::vector<core::TraceEvent>* trace) {
    const std::int32_t m = walk_->schedule().microbatches;
    CpuBodies bodies(job_, groups_, chunks_, samples, first_sample, m, fsdp_.get());
    // A traced step starts from a barrier, so every rank's clock has the same origin (within
    // the barrier's exit spread) and sends line up with their receives on the timeline.
    if (trace) groups_.world->barrier();
    std::optional<HostClockTracer> tracer;
    if (trace) tracer.emplace(*trace);
    const WalkResult walked =
        walk_->run(bodies, {forward_only, tracer ? &*tracer : nullptr, groups_.world_rank});
    stats.peak_activation_bytes =
        std::max(stats.peak_activation_bytes, walked.peak_activation_bytes);
    const bool last =
        std::any_of(chunks_.begin(), chunks_.end(), [](const GptChunk& c) { return c.last(); });
    stats.loss = step_loss(bodies.loss_sum() / double(m), last, groups_.coord.tp, job_.plan.dp,
                           *groups_.world);
    // Every rank takes part in each module's sum; the last stage's hold the values.
    stats.mtp_losses.assign(std::size_t(job_.model.mtp_num_layers), 0.0);
    const std::vector<double>& sums = bodies.mtp_loss_sums();
    for (std::size_t d = 0; d < stats.mtp_losses.size(); ++d)
        stats.mtp_losses[d] = step_loss((d < sums.size() ? sums[d] : 0.0) / double(m), last,
                                        groups_.coord.tp, job_.plan.dp, *groups_.world);
}

double CpuTrainer::reduce_and_update(std::int64_t index, StepStats& stats) {
    const core::ParallelPlan& p = job_.plan;
    const core::TrainingSpec& t = job_.training;
    float* grads = store_.grads.data();
    if (!fsdp_) {
        sum_partial_gradients(job_, store_, grads, groups_.embedding.get(), *groups_.tensor);
        if (core::placement_of(p.schedule) == core::StagePlacement::v_shape)
            sum_tied_embedding_locally(job_, store_, grads);
    }
    if (twins_ && !fsdp_) twins_->sum_gradients(grads);
    // Data parallelism: gradients summed over the data ranks, in buckets (Megatron's DDP), or
    // reduce-scattered so each rank gets the sum over its slices (distributed optimizer; with
    // ZeRO-2/3 every micro-batch's were already, fsdp_units.h).
    Communicator& data = *groups_.data;
    Vec owned_grads;
    float* g = grads; // this rank's owned elements, in the moments' order
    if (fsdp_) {
        g = fsdp_->finish_gradients();
        // DualPipe: the twins' chunks are sharded alike, so their slices sum as whole ones do.
        if (twins_) twins_->sum_gradients(g, fsdp_->owned_chunk_ranges());
    } else if (p.distributed_optimizer) {
        owned_grads = reduce_scatter_sets(grads);
        g = owned_grads.data();
    }
    if (p.distributed_optimizer) {
        // Hybrid sharding: each replica reduced its own ranks' gradients into its shards; the
        // replicas' shards are summed once a step (Megatron's distributed optimizer instances).
        std::int64_t at = 0;
        for (const ShardedSet& set : sharded_sets_) {
            Communicator& replicas =
                set.expert ? *groups_.expert_data_replica : *groups_.data_replica;
            if (replicas.size() > 1)
                replicas.all_reduce_sum(g + at, std::size_t(set.owned_elements()));
            at += set.owned_elements();
        }
    } else {
        // Dense tensors over the data ranks, in buckets; routed experts' over the ranks holding
        // the same experts (the expert-data group).
        for (const GradientBuckets::Bucket& b : dense_buckets_->buckets())
            data.all_reduce_sum(grads + b.begin, std::size_t(b.end - b.begin));
        for (const auto& tensor : store_.tensors)
            if (tensor.expert)
                groups_.expert_data->all_reduce_sum(grads + tensor.offset,
                                                    std::size_t(tensor.size));
    }
    // Global gradient norm: each parameter once (see add_optimizer_runs), over the ranks that
    // share its slices when sharded, and over the tensor and pipeline ranks of the model.
    double dense = 0.0, experts = 0.0; // in double: 10^8 squares would drown in float
    for (const OptimizerShard::Run& run : shard_.norm_runs)
        (run.flag ? experts : dense) +=
            kernels::cpu::sum_of_squares(g + run.begin, run.end - run.begin);
    float dense_squares = float(dense), expert_squares = float(experts);
    if (p.distributed_optimizer) { // every replica holds the same shards: one counts
        groups_.data_shard->all_reduce_sum(&dense_squares, 1);
        groups_.expert_data_shard->all_reduce_sum(&expert_squares, 1);
    }
    // Dense tensors over the model's tensor and pipeline ranks; each routed expert lives on one
    // expert rank, its columns over the expert-tensor ranks, its layer on one pipeline rank.
    groups_.model->all_reduce_sum(&dense_squares, 1);
    if (job_.model.moe) {
        groups_.expert->all_reduce_sum(&expert_squares, 1);
        groups_.expert_tensor->all_reduce_sum(&expert_squares, 1);
        groups_.pipeline->all_reduce_sum(&expert_squares, 1);
    }
    const float squares = dense_squares + expert_squares;
    const std::optional<float> clipping = finish_gradient_norm(squares, index, t, stats, skipped_);
    if (!clipping) return stats.grad_norm;
    // AdamW with decay on matrices only, one call per run of equal decay in this shard, each
    // gradient times the clipping factor.
    float* values = store_.values.data();
    for (const OptimizerShard::Run& run : shard_.decay_runs)
        kernels::cpu::adamw_update(values + run.flat, g + run.begin, adam_m_.data() + run.begin,
                                   adam_v_.data() + run.begin, run.end - run.begin, float(stats.lr),
                                   float(t.adam_beta1), float(t.adam_beta2), 1e-8f,
                                   run.flag ? float(t.weight_decay) : 0.0f, int(index + 1),
                                   *clipping);
    // ZeRO-1/2 give the stepped slices back to every rank; ZeRO-3 gathers each unit when used.
    if (p.distributed_optimizer && !(fsdp_ && fsdp_->shards_parameters())) all_gather_sets();
    if (twins_) copy_twin_parameters();
    return stats.grad_norm;
}

// DualPipe's chunk 1 takes its twin's stepped chunk 0: whole values, or under ZeRO-3 this
// rank's slices of them (the other slices arrive with the units' gathers).
void CpuTrainer::copy_twin_parameters() {
    if (!fsdp_ || !fsdp_->shards_parameters()) {
        twins_->copy_parameters(store_.values.data());
        return;
    }
    const Vec mine = fsdp_->owned_values(0);
    const ChunkRanges at = fsdp_->owned_chunk_ranges();
    Vec twin(static_cast<std::size_t>(at.end1 - at.begin1));
    twins_->swap_with_twin(mine.data(), std::int64_t(mine.size()), twin.data(),
                           std::int64_t(twin.size()));
    fsdp_->set_owned_values(1, twin.data());
}

Communicator& CpuTrainer::group_of_set(std::size_t set) {
    return sharded_sets_[set].expert ? *groups_.expert_data_shard : *groups_.data_shard;
}

Vec CpuTrainer::reduce_scatter_sets(const float* grads) {
    Vec owned(static_cast<std::size_t>(shard_.size));
    std::int64_t at = 0;
    for (std::size_t i = 0; i < sharded_sets_.size(); ++i) {
        reduce_scatter_set(sharded_sets_[i], group_of_set(i), grads, owned.data() + at, false);
        at += sharded_sets_[i].owned_elements();
    }
    return owned;
}

void CpuTrainer::all_gather_sets() {
    for (std::size_t i = 0; i < sharded_sets_.size(); ++i)
        all_gather_set(sharded_sets_[i], group_of_set(i), store_.values.data());
}

CpuTrainer::~CpuTrainer() = default;

StepStats CpuTrainer::step(std::int64_t index, std::vector<core::TraceEvent>* trace) {
    const auto start = Clock::now();
    StepStats stats;
    stats.step = index;
    if (fsdp_)
        fsdp_->begin_step(); // the gradients were zeroed as they were reduced
    else
        kernels::cpu::fill(store_.grads.data(), std::int64_t(store_.grads.size()), 0.0f);
    if (fp8_) fp8_->record(true);
    run_schedule(samples_, index * job_.training.global_batch_size, false, stats, trace);
    if (fp8_) {
        fp8_->record(false); // evaluation reads the scales without moving them
        fp8_->end_step();
    }
    reduce_and_update(index, stats);
    stats.peak_parameter_bytes =
        double(fsdp_ ? fsdp_->peak_held_elements() : std::int64_t(store_.values.size())) *
        sizeof(float);
    stats.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    return stats;
}

double CpuTrainer::evaluate(const SampleSource& samples, std::int64_t first_sample) {
    StepStats stats;
    run_schedule(samples, first_sample, true, stats, nullptr);
    return stats.loss;
}

const ParameterStore& CpuTrainer::parameters() {
    if (fsdp_) fsdp_->gather_all();
    return store_;
}

std::vector<Fp8AmaxHistory> CpuTrainer::fp8_amax_histories() const {
    return fp8_ ? fp8_->histories() : std::vector<Fp8AmaxHistory>{};
}

void CpuTrainer::restore_fp8_amax_histories(const std::vector<Fp8AmaxHistory>& saved) {
    if (fp8_) fp8_->restore(saved);
}

TrainerState CpuTrainer::state() {
    if (fsdp_) fsdp_->gather_all();
    return {store_.values, adam_m_, adam_v_, shard_.owned, &skipped_, &store_};
}

} // namespace trident::executor
