#include "trident/executor/cuda_trainer.h"

#include "cuda_gpt_chunk.h"
#include "partial_sums.h"
#include "schedule_walk.h"
#include "trident/core/internal_error.h"
#include "trident/core/spec_error.h"
#include "trident/core/step_numbers.h"
#include "trident/core/units.h"
#include "trident/executor/backend.h"
#include "trident/executor/gradient_buckets.h"
#include "trident/executor/mpi.h"
#include "trident/executor/nccl_communicator.h"
#include "trident/kernels/cuda/adamw.h"
#include "trident/kernels/cuda/caching_allocator.h"
#include "trident/kernels/cuda/device_buffer.h"
#include "trident/kernels/cuda/elementwise.h"
#include "trident/kernels/cuda/error.h"
#include "trident/kernels/cuda/gemm.h"
#include "trident/kernels/cuda/stream.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <mpi.h>
#include <numeric>
#include <optional>

namespace trident::executor {

namespace kc = kernels::cuda;
using Clock = std::chrono::steady_clock;

namespace {

// This rank's GPU: its rank among the ranks on the same node, modulo the visible devices
// (mpirun places consecutive ranks on a node; one GPU per rank is the intended layout).
int select_local_device() {
    const int devices = kc::visible_device_count();
    if (devices <= 0) throw core::SpecError("--backend", "cuda: no CUDA device is visible");
    const int device = node_place().rank % devices;
    TRIDENT_CUDA_CHECK(cudaSetDevice(device));
    return device;
}

// Refuses (SpecError "model", on every rank) a job whose weights, gradients and optimizer
// state alone would not fit in some rank's free GPU memory: fp32 master weights and main
// gradients, the bf16 copy, and Adam's moments over this rank's optimizer shard.
void require_device_memory(const core::JobSpec& job) {
    std::size_t free_bytes = 0, total_bytes = 0;
    TRIDENT_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    // bf16 weights, fp32 gradients and master weights (held whole: the optimizer updates its
    // shard and all-gathers), fp32 moments over the optimizer's shard.
    const core::Precision held{core::Dtype::bf16, core::Dtype::fp32, core::Dtype::fp32, true};
    const double needed = rank_parameters_estimate(job) *
                          core::state_bytes_per_parameter(held, optimizer_shards(job.plan), false);
    if (on_every_rank(needed <= double(free_bytes))) return;
    throw core::SpecError("model", "needs about " + core::bytes_text(needed) +
                                       " of GPU memory per rank for weights, gradients and Adam "
                                       "state before any activation; the GPU has " +
                                       core::bytes_text(double(free_bytes)) +
                                       " free: use more tensor or pipeline ranks, or "
                                       "--distributed-optimizer");
}

// Makes `waiter` wait for everything enqueued on `signaller` so far.
void join(cudaStream_t waiter, cudaStream_t signaller, const kc::Event& event) {
    event.record(signaller);
    TRIDENT_CUDA_CHECK(cudaStreamWaitEvent(waiter, event.get(), 0));
}

class CudaTrainer final : public Trainer {
public:
    CudaTrainer(const core::JobSpec& job, ProcessGroups& groups, std::uint64_t seed,
                SampleSource samples);
    ~CudaTrainer() override {
        cudaStreamSynchronize(data_stream_.get());
        cudaStreamSynchronize(compute_.get());
    }

    StepStats step(std::int64_t index, std::vector<core::TraceEvent>* trace) override;
    double evaluate(const SampleSource& samples, std::int64_t first_sample) override;
    const ParameterStore& parameters() override;
    std::int64_t skipped_steps() const override { return skipped_; }
    TrainerState state() override;
    void state_loaded() override;
    std::vector<double> routed_tokens_per_expert() override {
        // `run` refuses MoE models on this backend before a trainer exists.
        throw core::InternalError("the CUDA backend trains no MoE layers to count");
    }
    std::vector<std::vector<double>> routed_passes() override {
        throw core::InternalError("the CUDA backend trains no MoE layers to count");
    }

private:
    struct Timed { // a trace event's device-side start and end
        core::TraceEvent event;
        std::unique_ptr<kc::Event> start, end;
    };
    class Bodies;
    class Tracer;
    void run_schedule(const SampleSource& samples, std::int64_t first_sample, bool forward_only,
                      StepStats& stats, std::vector<Timed>* timed);
    void reduce_bucket(std::int32_t bucket, std::vector<Timed>* timed);
    void reduce_and_update(std::int64_t index, StepStats& stats, std::vector<Timed>* timed);
    Timed begin_event(core::Stream stream, core::EventKind kind, std::int32_t mb,
                      std::int32_t chunk, double bytes, cudaStream_t on);

    const core::JobSpec job_;
    ProcessGroups& groups_;
    SampleSource samples_;
    std::unique_ptr<ScheduleWalk> walk_;  // this pipeline rank's walk of the step's schedule
    std::vector<std::int32_t> positions_; // of a sequence's tokens (all: no context parallelism)
    int device_;
    // Declared in the order they must outlive each other: streams, allocator, cuBLASLt, NCCL.
    kc::Stream compute_, data_stream_;
    kc::CachingAllocator allocator_;
    kc::LtGemm gemm_;
    NcclProcessGroups nccl_;
    ParameterStore store_; // host: names, offsets, and the values checkpoints read
    std::vector<CudaGptChunk> chunks_;
    OptimizerShard shard_;
    kc::DeviceBuffer<float> master_, grads_, adam_m_, adam_v_, scalars_;
    kc::DeviceBuffer<bf16> weights_;
    PinnedHostBuffer<std::int32_t> token_staging_; // inputs and targets per (micro-batch, chunk)
    Vec host_m_, host_v_;
    std::unique_ptr<GradientBuckets> buckets_; // null without data parallelism or with ZeRO-1
    kc::Event join_event_, step_start_;
    std::int64_t skipped_ = 0;
};

CudaTrainer::CudaTrainer(const core::JobSpec& job, ProcessGroups& groups, std::uint64_t seed,
                         SampleSource samples)
    : job_(job), groups_(groups),
      samples_(samples ? std::move(samples) : synthetic_samples(job, seed)),
      walk_(std::make_unique<ScheduleWalk>(
          core::make_schedule(job.plan.schedule, std::int32_t(job.plan.pp),
                              std::int32_t(job.plan.vpp),
                              std::int32_t(job.micro_batches_per_step())),
          std::int32_t(groups.coord.pp))),
      positions_(std::size_t(job.training.seq_length)), device_(select_local_device()),
      nccl_(groups, compute_.get(), data_stream_.get()) {
    require_supported(job);
    require_supported_on_cuda(job);
    // Host: fp32 values and (while the CPU chunks initialise them) gradients, then the Adam
    // moments' host copies for checkpoints.
    require_host_memory(job, 16.0, "the host copies of the parameters and Adam state");
    require_device_memory(job);
    std::iota(positions_.begin(), positions_.end(), 0);
    nccl_.pipeline->use_staging_allocator(&allocator_);
    // The CPU chunks lay out and initialise the parameters (the same values as --backend cpu);
    // the CUDA chunks find their tensors in that layout by name.
    const std::int32_t pp_rank = std::int32_t(groups.coord.pp);
    {
        std::vector<GptChunk> cpu_chunks;
        for (std::int32_t c = 0; c < job.plan.vpp; ++c)
            cpu_chunks.emplace_back(job, pp_rank, c, int(groups.coord.tp), int(groups.coord.ep),
                                    int(groups.coord.cp), store_, seed);
    }
    for (std::int32_t c = 0; c < job.plan.vpp; ++c)
        chunks_.emplace_back(job, pp_rank, c, int(groups.coord.tp), store_);
    shard_ = optimizer_shard(store_, job.plan.distributed_optimizer, groups.data->size(),
                             groups.data->rank(), groups.coord.tp);
    store_.values.resize(std::size_t(shard_.padded_size), 0.0f);
    Vec().swap(store_.grads); // gradients live on the device only
    const auto n = std::size_t(shard_.padded_size);
    master_ = kc::DeviceBuffer<float>(n);
    grads_ = kc::DeviceBuffer<float>(n);
    weights_ = kc::DeviceBuffer<bf16>(n);
    adam_m_ = kc::DeviceBuffer<float>(std::size_t(shard_.size));
    adam_v_ = kc::DeviceBuffer<float>(std::size_t(shard_.size));
    scalars_ = kc::DeviceBuffer<float>(2); // [0] loss sum, [1] squared gradient norm
    token_staging_ =
        PinnedHostBuffer<std::int32_t>(2 * job.micro_batches_per_step() * job.plan.vpp *
                                       job.plan.micro_batch_size * job.training.seq_length);
    host_m_.assign(std::size_t(shard_.size), 0.0f);
    host_v_.assign(std::size_t(shard_.size), 0.0f);
    state_loaded(); // uploads the initial values and zero moments
    if (groups.data->size() > 1 && !job.plan.distributed_optimizer)
        buckets_ = std::make_unique<GradientBuckets>(
            store_, core::ddp_bucket_elements(groups.data->size()));
}

const ParameterStore& CudaTrainer::parameters() {
    const cudaStream_t s = compute_.get();
    TRIDENT_CUDA_CHECK(cudaMemcpyAsync(store_.values.data(), master_.get(), master_.size_bytes(),
                                       cudaMemcpyDeviceToHost, s));
    TRIDENT_CUDA_CHECK(cudaStreamSynchronize(s));
    return store_;
}

TrainerState CudaTrainer::state() {
    const cudaStream_t s = compute_.get();
    TRIDENT_CUDA_CHECK(cudaMemcpyAsync(host_m_.data(), adam_m_.get(), adam_m_.size_bytes(),
                                       cudaMemcpyDeviceToHost, s));
    TRIDENT_CUDA_CHECK(cudaMemcpyAsync(host_v_.data(), adam_v_.get(), adam_v_.size_bytes(),
                                       cudaMemcpyDeviceToHost, s));
    parameters(); // and waits for all three
    return {store_.values, host_m_, host_v_, shard_.owned, &skipped_, &store_};
}

void CudaTrainer::state_loaded() {
    // On the compute stream: the legacy stream's cudaMemcpy would not be ordered before the
    // conversion below on this non-blocking stream.
    const cudaStream_t s = compute_.get();
    TRIDENT_CUDA_CHECK(cudaMemcpyAsync(master_.get(), store_.values.data(), master_.size_bytes(),
                                       cudaMemcpyHostToDevice, s));
    TRIDENT_CUDA_CHECK(cudaMemcpyAsync(adam_m_.get(), host_m_.data(), adam_m_.size_bytes(),
                                       cudaMemcpyHostToDevice, s));
    TRIDENT_CUDA_CHECK(cudaMemcpyAsync(adam_v_.get(), host_v_.data(), adam_v_.size_bytes(),
                                       cudaMemcpyHostToDevice, s));
    kc::convert<bf16, float>(weights_.get(), master_.get(), std::int64_t(master_.size()), s);
    TRIDENT_CUDA_CHECK(cudaStreamSynchronize(s));
}

CudaTrainer::Timed CudaTrainer::begin_event(core::Stream stream, core::EventKind kind,
                                            std::int32_t mb, std::int32_t chunk, double bytes,
                                            cudaStream_t on) {
    Timed t{{groups_.world_rank, stream, kind, mb, chunk, 0.0, 0.0, bytes, 0.0},
            std::make_unique<kc::Event>(),
            std::make_unique<kc::Event>()};
    t.start->record(on);
    return t;
}

void CudaTrainer::reduce_bucket(std::int32_t b, std::vector<Timed>* timed) {
    const GradientBuckets::Bucket& bucket = buckets_->buckets()[std::size_t(b)];
    // The reduction reads gradients the compute stream has just finished writing.
    join(data_stream_.get(), compute_.get(), join_event_);
    const double bytes = double(bucket.end - bucket.begin) * sizeof(float);
    std::optional<Timed> t;
    if (timed)
        t = begin_event(core::Stream::data_parallel, core::EventKind::gradient_reduce, -1, -1,
                        bytes, data_stream_.get());
    nccl_.data->all_reduce_sum(grads_.get() + bucket.begin, std::size_t(bucket.end - bucket.begin));
    if (t) {
        t->end->record(data_stream_.get());
        timed->push_back(std::move(*t));
    }
}

// What one (micro-batch, chunk) holds while the schedule walk runs.
struct CudaSlot {
    CudaGptChunk::Activations acts;
    CudaTensor<bf16> received_activation, received_gradient;
};

// The CUDA backend's action bodies: bf16 chunks on the compute stream, NCCL point to point.
class CudaTrainer::Bodies final : public ActionBodies<CudaSlot> {
public:
    Bodies(CudaTrainer& t, const SampleSource& samples, std::int64_t first_sample,
           std::vector<Timed>* timed)
        : t_(t), samples_(samples), first_sample_(first_sample), timed_(timed),
          m_(t.walk_->schedule().microbatches),
          loss_tokens_(t.job_.plan.micro_batch_size * t.job_.training.seq_length),
          // The micro-batch's share of the step's mean loss, per token (as CpuTrainer's).
          ctx_{t.weights_.get(), t.grads_.get(),   &t.gemm_,
               &t.allocator_,    t.compute_.get(), t.nccl_.tensor.get()},
          weight_passes_(t.chunks_.size(), 0) {}

    std::int64_t loss_tokens() const { return loss_tokens_; }

    void forward(const WalkAction& w, CudaSlot& slot) override {
        const cudaStream_t s = ctx_.stream;
        const CudaGptChunk& chunk = t_.chunks_[std::size_t(w.action.chunk)];
        microbatch_tokens(t_.job_, t_.groups_.coord.dp, t_.positions_, samples_, first_sample_,
                          w.action.microbatch, inputs_, targets_);
        const std::int64_t n = std::int64_t(inputs_.size());
        slot.acts.tokens = CudaTensor<std::int32_t>(t_.allocator_, n, s);
        slot.acts.targets = CudaTensor<std::int32_t>(t_.allocator_, n, s);
        // Through this (micro-batch, chunk)'s own pinned region, so the copies are asynchronous
        // and no later micro-batch overwrites them before they run.
        std::int32_t* staged =
            t_.token_staging_.get() +
            2 * n * (std::int64_t(w.action.microbatch) * t_.job_.plan.vpp + w.action.chunk);
        std::copy(inputs_.begin(), inputs_.end(), staged);
        std::copy(targets_.begin(), targets_.end(), staged + n);
        const std::size_t bytes = std::size_t(n) * sizeof(std::int32_t);
        TRIDENT_CUDA_CHECK(
            cudaMemcpyAsync(slot.acts.tokens.get(), staged, bytes, cudaMemcpyHostToDevice, s));
        TRIDENT_CUDA_CHECK(
            cudaMemcpyAsync(slot.acts.targets.get(), staged + n, bytes, cudaMemcpyHostToDevice, s));
        if (!chunk.first()) slot.acts.input = std::move(slot.received_activation);
        const float grad_scale = 1.0f / float(m_ * t_.job_.plan.dp * loss_tokens_);
        chunk.forward(slot.acts, grad_scale, t_.scalars_.get(), ctx_);
    }
    // The CUDA chunk runs B and W as two passes even where the schedule fuses them.
    double backward_input(const WalkAction& w, CudaSlot& slot) override {
        t_.chunks_[std::size_t(w.action.chunk)].backward_input(slot.acts,
                                                               slot.received_gradient.get(), ctx_);
        slot.received_gradient.reset();
        return 0.0;
    }
    void backward_weight(const WalkAction& w, CudaSlot& slot) override {
        const bool last_pass = ++weight_passes_[std::size_t(w.action.chunk)] == m_;
        // With overlap_grad_reduce (Megatron's flag) each bucket's all-reduce starts as soon as
        // its last gradient is enqueued; without it, all start after the walk.
        t_.chunks_[std::size_t(w.action.chunk)].backward_weight(
            slot.acts, ctx_, last_pass && t_.buckets_ && t_.job_.plan.overlap_grad_reduce,
            [&](std::size_t tensor) {
                const std::int32_t b = t_.buckets_->mark_final(tensor);
                if (b >= 0) t_.reduce_bucket(b, timed_);
            });
    }
    void send_activation(const WalkAction& w, CudaSlot& slot) override {
        t_.nccl_.pipeline->send_typed(slot.acts.output.get(), hidden(w), ncclBfloat16,
                                      w.action.peer);
        slot.acts.output.reset(); // the send copied it into staging
    }
    void recv_activation(const WalkAction& w, CudaSlot& slot) override {
        slot.received_activation =
            CudaTensor<bf16>(t_.allocator_, std::int64_t(hidden(w)), ctx_.stream);
        t_.nccl_.pipeline->recv_typed(slot.received_activation.get(), hidden(w), ncclBfloat16,
                                      w.action.peer);
    }
    void send_gradient(const WalkAction& w, CudaSlot& slot) override {
        t_.nccl_.pipeline->send_typed(slot.acts.dinput.get(), hidden(w), ncclBfloat16,
                                      w.action.peer);
        slot.acts.dinput.reset();
    }
    void recv_gradient(const WalkAction& w, CudaSlot& slot) override {
        slot.received_gradient =
            CudaTensor<bf16>(t_.allocator_, std::int64_t(hidden(w)), ctx_.stream);
        t_.nccl_.pipeline->recv_typed(slot.received_gradient.get(), hidden(w), ncclBfloat16,
                                      w.action.peer);
    }
    void hand_activation(CudaSlot& from, CudaSlot& to) override {
        to.received_activation = std::move(from.acts.output);
    }
    void hand_gradient(CudaSlot& from, CudaSlot& to) override {
        to.received_gradient = std::move(from.acts.dinput);
    }
    void keep_only_input_gradient(CudaSlot& slot) override {
        CudaTensor<bf16> dinput = std::move(slot.acts.dinput);
        slot.acts = CudaGptChunk::Activations{};
        slot.acts.dinput = std::move(dinput);
    }
    void wait_sends() override { t_.nccl_.pipeline->wait_sends(); }
    double p2p_bytes(std::int32_t chunk) const override {
        return double(t_.chunks_[std::size_t(chunk)].hidden_elements()) * sizeof(bf16);
    }

private:
    std::size_t hidden(const WalkAction& w) const {
        return std::size_t(t_.chunks_[std::size_t(w.action.chunk)].hidden_elements());
    }

    CudaTrainer& t_;
    const SampleSource& samples_;
    std::int64_t first_sample_;
    std::vector<Timed>* timed_;
    std::int32_t m_;
    std::int64_t loss_tokens_;
    CudaChunkContext ctx_;
    std::vector<std::int32_t> weight_passes_; // per chunk: W passes enqueued this step
    std::vector<std::int32_t> inputs_, targets_;
};

// Device-event tracing: each action's start and end recorded on the compute stream, turned into
// seconds once the step has synchronised (step()).
class CudaTrainer::Tracer final : public ActionTracer {
public:
    Tracer(CudaTrainer& t, std::vector<Timed>& out) : t_(t), out_(out) {}
    void begin(const core::TraceEvent& event) override {
        open_ = Timed{event, std::make_unique<kc::Event>(), std::make_unique<kc::Event>()};
        open_.start->record(t_.compute_.get());
    }
    void end(double) override {
        open_.end->record(t_.compute_.get());
        out_.push_back(std::move(open_));
    }

private:
    CudaTrainer& t_;
    std::vector<Timed>& out_;
    Timed open_;
};

void CudaTrainer::run_schedule(const SampleSource& samples, std::int64_t first_sample,
                               bool forward_only, StepStats& stats, std::vector<Timed>* timed) {
    const cudaStream_t s = compute_.get();
    TRIDENT_CUDA_CHECK(cudaMemsetAsync(scalars_.get(), 0, sizeof(float), s));
    Bodies bodies(*this, samples, first_sample, timed);
    std::optional<Tracer> tracer;
    if (timed) tracer.emplace(*this, *timed);
    walk_->run(bodies, {forward_only, tracer ? &*tracer : nullptr, groups_.world_rank});
    float loss_sum = 0.0f;
    TRIDENT_CUDA_CHECK(
        cudaMemcpyAsync(&loss_sum, scalars_.get(), sizeof(float), cudaMemcpyDeviceToHost, s));
    TRIDENT_CUDA_CHECK(cudaStreamSynchronize(s));
    const double microbatch_mean =
        double(loss_sum) / double(bodies.loss_tokens()) / double(walk_->schedule().microbatches);
    stats.loss = step_loss(microbatch_mean, chunks_.back().last(), groups_.coord.tp, job_.plan.dp,
                           *groups_.world);
}

void CudaTrainer::reduce_and_update(std::int64_t index, StepStats& stats,
                                    std::vector<Timed>* timed) {
    const core::ParallelPlan& p = job_.plan;
    const core::TrainingSpec& t = job_.training;
    const cudaStream_t s = compute_.get();
    float* grads = grads_.get();
    std::optional<Timed> reduce;
    if (timed && !buckets_ && groups_.data->size() > 1)
        reduce = begin_event(core::Stream::data_parallel, core::EventKind::gradient_reduce, -1, -1,
                             double(shard_.padded_size) * sizeof(float), data_stream_.get());
    // Tied embeddings on two stages: both copies take the summed gradient; under sequence
    // parallelism each tensor rank holds the norms' gradients of its rows only: summed over the
    // tensor group. Before a reduce-scatter (the stages' shards do not line up with these
    // tensors, so the sums must be whole first); after bucketed all-reduces, which they
    // commute with but must not overlap.
    const auto sync_partial_gradients = [&] {
        sum_partial_gradients(job_, store_, grads, nccl_.embedding.get(), *nccl_.tensor);
    };
    if (buckets_) {
        for (std::int32_t b : buckets_->incomplete()) reduce_bucket(b, timed); // not overlapped
        join(s, data_stream_.get(), join_event_);
        sync_partial_gradients();
    } else {
        sync_partial_gradients();
        if (p.distributed_optimizer && groups_.data->size() > 1) {
            join(data_stream_.get(), s, join_event_);
            // In place: this rank's shard of the buffer receives the sum over the data ranks.
            nccl_.data->reduce_scatter_sum(grads, grads + shard_.begin, std::size_t(shard_.size));
        }
    }
    if (reduce) {
        reduce->end->record(data_stream_.get());
        timed->push_back(std::move(*reduce));
    }
    join(s, data_stream_.get(), join_event_); // the optimizer reads the reduced gradients
    float* g = grads + shard_.begin;
    // Global gradient norm over this rank's norm runs, then summed over the ranks (MPI: one
    // float) as CpuTrainer does.
    std::vector<kc::GradientView> views;
    for (const OptimizerShard::Run& run : shard_.norm_runs)
        views.push_back({g + run.begin, run.end - run.begin});
    TRIDENT_CUDA_CHECK(cudaMemsetAsync(scalars_.get() + 1, 0, sizeof(float), s));
    kc::gradient_squared_norm(scalars_.get() + 1, views, s);
    float squares = 0.0f;
    TRIDENT_CUDA_CHECK(
        cudaMemcpyAsync(&squares, scalars_.get() + 1, sizeof(float), cudaMemcpyDeviceToHost, s));
    TRIDENT_CUDA_CHECK(cudaStreamSynchronize(s));
    if (p.distributed_optimizer) groups_.data->all_reduce_sum(&squares, 1);
    groups_.model->all_reduce_sum(&squares, 1);
    const std::optional<float> clipping = finish_gradient_norm(squares, index, t, stats, skipped_);
    if (!clipping) return;
    const float clip = *clipping;
    std::optional<Timed> opt;
    if (timed) opt = begin_event(core::Stream::compute, core::EventKind::optimizer, -1, -1, 0.0, s);
    // AdamW with decay on matrices only: one multi-tensor launch per decay setting.
    for (const bool decayed : {true, false}) {
        std::vector<kc::AdamWTensor> tensors;
        for (const OptimizerShard::Run& run : shard_.decay_runs)
            if (run.flag == decayed)
                tensors.push_back({master_.get() + shard_.begin + run.begin, g + run.begin,
                                   adam_m_.get() + run.begin, adam_v_.get() + run.begin,
                                   weights_.get() + shard_.begin + run.begin, run.end - run.begin});
        if (tensors.empty()) continue;
        kc::AdamWConfig config;
        config.lr = float(stats.lr);
        config.beta1 = float(t.adam_beta1);
        config.beta2 = float(t.adam_beta2);
        config.eps = 1e-8f;
        config.weight_decay = decayed ? float(t.weight_decay) : 0.0f;
        config.step = int(index + 1);
        config.grad_scale = clip;
        kc::adamw_step(tensors, config, s);
    }
    if (p.distributed_optimizer && groups_.data->size() > 1) {
        // Every rank's updated shard to every rank (in place), and the bf16 copy from it.
        join(data_stream_.get(), s, join_event_);
        nccl_.data->all_gather(master_.get() + shard_.begin, master_.get(),
                               std::size_t(shard_.size));
        join(s, data_stream_.get(), join_event_);
        kc::convert<bf16, float>(weights_.get(), master_.get(), shard_.padded_size, s);
    }
    if (opt) {
        opt->end->record(s);
        timed->push_back(std::move(*opt));
    }
}

StepStats CudaTrainer::step(std::int64_t index, std::vector<core::TraceEvent>* trace) {
    const auto start = Clock::now();
    StepStats stats;
    stats.step = index;
    std::vector<Timed> timed;
    std::vector<Timed>* timing = trace ? &timed : nullptr;
    allocator_.reset_peaks();
    const std::size_t resident = allocator_.stats().in_use_bytes;
    if (trace) { // one time origin for every rank's timeline, as CpuTrainer's
        TRIDENT_CUDA_CHECK(cudaStreamSynchronize(compute_.get()));
        groups_.world->barrier();
    }
    step_start_.record(compute_.get());
    TRIDENT_CUDA_CHECK(cudaMemsetAsync(grads_.get(), 0, grads_.size_bytes(), compute_.get()));
    if (buckets_) buckets_->reset();
    run_schedule(samples_, index * job_.training.global_batch_size, false, stats, timing);
    reduce_and_update(index, stats, timing);
    TRIDENT_CUDA_CHECK(cudaStreamSynchronize(compute_.get()));
    TRIDENT_CUDA_CHECK(cudaStreamSynchronize(data_stream_.get()));
    stats.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    stats.peak_activation_bytes = double(allocator_.stats().peak_in_use_bytes - resident);
    stats.peak_parameter_bytes = double(store_.values.size()) * sizeof(float);
    if (trace) {
        // Device times relative to the step's first event; the host clock's start is the
        // origin CpuTrainer's trace uses, so both backends' traces start near zero.
        for (Timed& t : timed) {
            t.event.start_s = double(t.start->elapsed_ms_since(step_start_)) / 1e3;
            t.event.end_s = double(t.end->elapsed_ms_since(step_start_)) / 1e3;
            trace->push_back(t.event);
        }
    }
    return stats;
}

double CudaTrainer::evaluate(const SampleSource& samples, std::int64_t first_sample) {
    StepStats stats;
    run_schedule(samples, first_sample, true, stats, nullptr);
    return stats.loss;
}

} // namespace

std::unique_ptr<Trainer> make_cuda_trainer(const core::JobSpec& job, ProcessGroups& groups,
                                           std::uint64_t seed, SampleSource samples) {
    require_supported(job);
    require_supported_on_cuda(job);
    return std::make_unique<CudaTrainer>(job, groups, seed, std::move(samples));
}

} // namespace trident::executor
