#pragma once
// Training a JobSpec for real on this process's rank: the model chunks this pipeline rank
// owns, the shared Schedule walked action by action (sends, receives, F, B, W), then the
// tied-embedding sync, data-parallel gradient reduction (bucketed all-reduce, or reduce-scatter
// with the distributed optimizer), global gradient-norm clipping and AdamW.
//
// `Trainer` is what `trident run`, evaluation and checkpoints need of either backend;
// `CpuTrainer` (here, MPI) and the CUDA backend's trainer (cuda_trainer.h, NCCL) implement it
// over the same Schedule, the same parameter layout (ParameterStore) and the same optimizer
// shard, so checkpoints move between backends.
#include "trident/core/job.h"
#include "trident/core/schedule.h"
#include "trident/core/trace.h"
#include "trident/executor/gpt_chunk.h"
#include "trident/executor/process_groups.h"

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace trident::executor {

class DualPipeTwins;
class FsdpUnits;
class Fp8Numerics;
struct ShardedSet;

class ScheduleWalk;
class GradientBuckets;

// The checks that say what this executor cannot run yet; throws SpecError naming the field.
void require_supported(const core::JobSpec& job);
// What the spec asks for that this executor runs without (each "field: reason"); the run goes
// on, and says so once.
std::vector<std::string> ignored_by_executor(const core::JobSpec& job, bool cuda_backend);

struct StepStats {
    std::int64_t step = 0;
    double loss = 0.0; // mean over the global batch's tokens
    // Per multi-token-prediction module: its mean cross-entropy over the step, unweighted
    // (Megatron's "mtp_1 loss", …; the gradient weighs them by λ / D).
    std::vector<double> mtp_losses;
    double grad_norm = 0.0; // before clipping
    double lr = 0.0;
    double seconds = 0.0;
    bool skipped = false;               // non-finite gradients: no update
    double peak_activation_bytes = 0.0; // this rank, during the step
    // The parameters this rank held at once (ZeRO-3: its slices and the units gathered; else
    // its whole flat buffer), fp32.
    double peak_parameter_bytes = 0.0;
};

// Writes sample `index` of a token stream — seq_length + 1 ids, inputs and next-token
// targets — into `tokens`. The global batch of step s is samples s·B … s·B + B − 1; each
// data-parallel rank reads its contiguous part of it.
using SampleSource = std::function<void(std::int64_t index, std::int32_t* tokens)>;

// A contiguous run of a rank's flat parameter buffer.
struct FlatRun {
    std::int64_t begin = 0, length = 0;
    bool operator==(const FlatRun&) const = default;
};

// The optimizer state a checkpoint holds for this rank (views into the trainer).
// One FP8 operand's delayed-scaling amax history, oldest first, keyed by what it scales in any
// layout: the global layer, the linear (GptChunk::Linear), the global routed expert (−1: a
// dense GEMM) and the operand (0 input, 1 weight, 2 output gradient).
struct Fp8AmaxHistory {
    std::int64_t layer = 0, linear = 0, expert = -1, operand = 0;
    std::vector<float> amaxes;
};

struct TrainerState {
    std::span<float> parameters; // this rank's whole flat buffer (padded)
    std::span<float> adam_m, adam_v;
    // The flat elements the moments belong to, in the moments' order: everything, one ZeRO-1
    // shard, or — dense and expert tensors sharded over different groups — several runs.
    std::vector<FlatRun> moment_runs;
    std::int64_t* skipped_steps = nullptr;
    const ParameterStore* store = nullptr; // the tensors: names, offsets, placement
};

class Trainer {
public:
    virtual ~Trainer() = default;
    // One optimizer step (0-based index); records events into `trace` when given.
    virtual StepStats step(std::int64_t index, std::vector<core::TraceEvent>* trace = nullptr) = 0;
    // Mean loss over the global batch that starts at sample `first_sample` of `samples`,
    // forward passes only (the schedule's forward actions in its order); no state changes.
    virtual double evaluate(const SampleSource& samples, std::int64_t first_sample) = 0;
    // The current parameters in host memory (the device backend copies them down first).
    virtual const ParameterStore& parameters() = 0;
    virtual std::int64_t skipped_steps() const = 0;
    // Host views of the optimizer state; a checkpoint load writes into them and then calls
    // state_loaded() (the device backend copies them up).
    virtual TrainerState state() = 0;
    virtual void state_loaded() {}
    // Routed slots per expert over every MoE layer and training micro-batch so far, summed
    // over all ranks: the measured histogram moe.load_balance takes. Collective over
    // MPI_COMM_WORLD; the same on every rank.
    virtual std::vector<double> routed_tokens_per_expert() = 0;
    // Per pass (an MoE layer's training forward of a micro-batch) what each expert received
    // from the ranks that feed it (the etp·ep group), as moe.load_balance's "passes" reads
    // them; on world rank 0 (empty elsewhere). Collective.
    virtual std::vector<std::vector<double>> routed_passes() = 0;
    // Delayed FP8 scaling's amax histories that this rank speaks for — each operand once over
    // the ranks sharing it (they hold the same history) — for a checkpoint; none without the
    // delayed recipe.
    virtual std::vector<Fp8AmaxHistory> fp8_amax_histories() const { return {}; }
    // Restores, by key, the saved histories of the operands this rank holds (a resharded
    // checkpoint's too: the keys do not depend on the layout).
    virtual void restore_fp8_amax_histories(const std::vector<Fp8AmaxHistory>&) {}
};

// The ranks one rank's optimizer state is divided over: the data group (data × context ranks,
// ProcessGroups::data) with the distributed optimizer, else 1.
std::int64_t optimizer_shards(const core::ParallelPlan& plan);
// The parameters the busiest rank of `job` holds (its pipeline rank's chunks, from the model
// layout table), for the memory checks made before anything is allocated.
double rank_parameters_estimate(const core::JobSpec& job);
// Whether every node's ranks of `job` fit `bytes_per_parameter` × their parameters in its
// available memory (MemAvailable; true when unknown), on every rank alike. Collective over
// MPI_COMM_WORLD.
bool host_memory_holds(const core::JobSpec& job, double bytes_per_parameter);
// Refuses, on every rank (SpecError "model"), a job whose ranks on some node would need more
// than that node's available memory (MemAvailable) for `bytes_per_parameter` × their
// parameters; `what` names what those bytes hold. Collective over MPI_COMM_WORLD.
void require_host_memory(const core::JobSpec& job, double bytes_per_parameter,
                         const std::string& what);

// The end of the gradient-norm computation both trainers share: the global norm from the
// squares summed over the ranks, this step's learning rate, a skipped step (counted in
// `skipped`) when the norm is not finite, else the factor clipping scales the gradients by
// (Megatron: clip_grad / (‖g‖ + 1e-6) when the norm exceeds clip_grad, else 1). Returns
// nothing for a skipped step.
std::optional<float> finish_gradient_norm(double squares, std::int64_t index,
                                          const core::TrainingSpec& training, StepStats& stats,
                                          std::int64_t& skipped);

// Megatron's learning-rate schedule at 0-based step `index`: linear warm-up, then linear or
// cosine decay to min_lr at decay_iters (or constant).
double learning_rate(const core::LrSchedule& schedule, std::int64_t index);

// Where this rank's optimizer works in the flat parameter buffer: all of it, or its 1/dp
// shard with the distributed optimizer (ZeRO-1), and — within that shard — the runs that take
// weight decay and the runs the global gradient norm counts.
struct OptimizerShard {
    struct Run {
        std::int64_t begin = 0, end = 0; // in this rank's owned elements (the moments' order)
        bool flag = false;               // decay runs: decayed; norm runs: an expert's
        std::int64_t flat = 0;           // where `begin` sits in the flat buffer
    };
    std::int64_t padded_size = 0; // the flat buffer, padded to a multiple of dp when sharded
    std::int64_t begin = 0, size = 0;
    std::vector<FlatRun> owned; // the flat elements this rank steps, in the moments' order
    std::vector<Run> decay_runs, norm_runs;
};
// One shard of the whole flat buffer (padded to a multiple of dp) when distributed, else all.
OptimizerShard optimizer_shard(const ParameterStore& store, bool distributed, std::int64_t dp,
                               std::int64_t dp_rank, std::int64_t tp_rank);
// Fills s.decay_runs and s.norm_runs over s.owned from the tensors of `store`.
// `etp_rank`: the rank's place in its expert-tensor group, where a routed expert's replicated
// tensors (its second bias) are counted once in the gradient norm (-1: tp_rank).
void add_optimizer_runs(const ParameterStore& store, std::int64_t tp_rank, OptimizerShard& s,
                        std::int64_t etp_rank = -1);

// The global index of the first sequence of micro-batch `microbatch` that data-parallel rank
// `dp_rank` reads from the global batch starting at `first_sample`.
std::int64_t microbatch_first_sample(const core::JobSpec& job, std::int64_t dp_rank,
                                     std::int64_t first_sample, std::int32_t microbatch);
// Micro-batch `microbatch` of the global batch starting at `first_sample`, as this rank reads
// it: each data-parallel rank its contiguous part, each context rank the tokens at `positions`
// of every sequence; inputs and next-token targets, [micro_batch_size × positions].
void microbatch_tokens(const core::JobSpec& job, std::int64_t dp_rank,
                       const std::vector<std::int32_t>& positions, const SampleSource& samples,
                       std::int64_t first_sample, std::int32_t microbatch,
                       std::vector<std::int32_t>& inputs, std::vector<std::int32_t>& targets);

// The CPU backend: fp32 model chunks over MPI.
class CpuTrainer final : public Trainer {
public:
    // An empty `samples` trains on synthetic_sequence(seed, …).
    CpuTrainer(const core::JobSpec& job, ProcessGroups& groups, std::uint64_t seed,
               SampleSource samples = {});
    ~CpuTrainer() override;

    StepStats step(std::int64_t index, std::vector<core::TraceEvent>* trace = nullptr) override;
    double evaluate(const SampleSource& samples, std::int64_t first_sample) override;
    // Under ZeRO-3 both gather every unit first: collective over the data ranks.
    const ParameterStore& parameters() override;
    std::int64_t skipped_steps() const override { return skipped_; }
    TrainerState state() override;
    std::vector<double> routed_tokens_per_expert() override;
    std::vector<std::vector<double>> routed_passes() override;
    std::vector<Fp8AmaxHistory> fp8_amax_histories() const override;
    void restore_fp8_amax_histories(const std::vector<Fp8AmaxHistory>& saved) override;

private:
    void run_schedule(const SampleSource& samples, std::int64_t first_sample, bool forward_only,
                      StepStats& stats, std::vector<core::TraceEvent>* trace);
    double reduce_and_update(std::int64_t index, StepStats& stats);

    const core::JobSpec job_;
    ProcessGroups& groups_;
    std::uint64_t seed_;
    SampleSource samples_;
    std::unique_ptr<ScheduleWalk> walk_; // this pipeline rank's walk of the step's schedule
    ParameterStore store_;
    std::vector<GptChunk> chunks_;
    // Optimizer: fp32 Adam moments over this rank's shard of the flat parameters.
    OptimizerShard shard_;
    Vec adam_m_, adam_v_;
    std::unique_ptr<GradientBuckets> dense_buckets_; // data-parallel all-reduce, experts aside
    std::vector<ShardedSet> sharded_sets_;           // distributed optimizer: dense, then experts
    Communicator& group_of_set(std::size_t set);
    // The summed gradients of this rank's slices, in the moments' order.
    Vec reduce_scatter_sets(const float* grads);
    // Every rank's stepped slices back into the flat parameters.
    void all_gather_sets();
    std::unique_ptr<DualPipeTwins> twins_; // DualPipe: chunk 1 is a copy of a twin's
    void copy_twin_parameters();
    std::unique_ptr<FsdpUnits> fsdp_;  // ZeRO-2/3: gradients (and parameters) by unit
    std::unique_ptr<Fp8Numerics> fp8_; // FP8 training: the linear layers' operands
    std::int64_t skipped_ = 0;
};

// Global-batch token stream: a deterministic, learnable synthetic corpus (a noisy linear
// recurrence over the vocabulary), the same for every layout.
void synthetic_sequence(std::uint64_t seed, std::int64_t sample, std::int64_t length,
                        std::int64_t vocab, std::int32_t* out);
// synthetic_sequence as the SampleSource of `job` (what an empty SampleSource means).
SampleSource synthetic_samples(const core::JobSpec& job, std::uint64_t seed);

} // namespace trident::executor
