#pragma once
// Training a JobSpec for real on this process's rank: the model chunks this pipeline rank
// owns, the shared Schedule walked action by action (sends, receives, F, B, W), then the
// tied-embedding sync, data-parallel gradient reduction (bucketed all-reduce, or reduce-scatter
// with the distributed optimizer), global gradient-norm clipping and AdamW.
#include "trident/core/job.h"
#include "trident/core/schedule.h"
#include "trident/core/trace.h"
#include "trident/executor/gpt_chunk.h"
#include "trident/executor/process_groups.h"

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace trident::executor {

// The checks that say what this executor cannot run yet; throws SpecError naming the field.
void require_supported(const core::JobSpec& job);
// What the spec asks for that this executor runs without (each "field: reason"); the run goes
// on, and says so once.
std::vector<std::string> ignored_by_executor(const core::JobSpec& job);

struct StepStats {
    std::int64_t step = 0;
    double loss = 0.0;      // mean over the global batch's tokens
    double grad_norm = 0.0; // before clipping
    double lr = 0.0;
    double seconds = 0.0;
    bool skipped = false;               // non-finite gradients: no update
    double peak_activation_bytes = 0.0; // this rank, during the step
};

// Writes sample `index` of a token stream — seq_length + 1 ids, inputs and next-token
// targets — into `tokens`. The global batch of step s is samples s·B … s·B + B − 1; each
// data-parallel rank reads its contiguous part of it.
using SampleSource = std::function<void(std::int64_t index, std::int32_t* tokens)>;

// The optimizer state a checkpoint holds for this rank (views into the trainer).
struct TrainerState {
    std::span<float> parameters; // this rank's whole flat buffer (padded)
    std::span<float> adam_m, adam_v;
    std::int64_t moment_begin = 0; // where the moments start in the flat buffer (ZeRO-1 shard)
    std::int64_t* skipped_steps = nullptr;
    const ParameterStore* store = nullptr; // the tensors: names, offsets, placement
};

class Trainer {
public:
    // An empty `samples` trains on synthetic_sequence(seed, …).
    Trainer(const core::JobSpec& job, ProcessGroups& groups, std::uint64_t seed,
            SampleSource samples = {});

    // One optimizer step (0-based index); records events into `trace` when given.
    StepStats step(std::int64_t index, std::vector<core::TraceEvent>* trace = nullptr);
    // Mean loss over the global batch that starts at sample `first_sample` of `samples`,
    // forward passes only (the schedule's forward actions in its order); no state changes.
    double evaluate(const SampleSource& samples, std::int64_t first_sample);
    const ParameterStore& parameters() const { return store_; }
    std::int64_t skipped_steps() const { return skipped_; }
    TrainerState state();
    double learning_rate(std::int64_t index) const;

private:
    void run_schedule(const SampleSource& samples, std::int64_t first_sample, bool forward_only,
                      StepStats& stats, std::vector<core::TraceEvent>* trace);
    double reduce_and_update(std::int64_t index, StepStats& stats);
    void tokens_for(const SampleSource& samples, std::int64_t first_sample, std::int32_t microbatch,
                    std::vector<std::int32_t>& inputs, std::vector<std::int32_t>& targets) const;

    const core::JobSpec job_;
    ProcessGroups& groups_;
    std::uint64_t seed_;
    SampleSource samples_;
    core::Schedule schedule_;
    ParameterStore store_;
    std::vector<GptChunk> chunks_;
    // Optimizer: fp32 Adam moments over this rank's part of the flat parameters — all of
    // them, or its 1/dp shard with the distributed optimizer — and, over that part, the runs
    // that take weight decay and the runs the gradient norm counts (experts apart: they are
    // summed over the expert group).
    struct Run {
        std::int64_t begin = 0, end = 0; // relative to the shard
        bool flag = false;               // decay: decayed; norm: an expert's
    };
    Vec adam_m_, adam_v_;
    std::vector<Run> decay_runs_, norm_runs_;
    std::int64_t shard_begin_ = 0, shard_size_ = 0, padded_size_ = 0;
    std::int64_t skipped_ = 0;
};

// Global-batch token stream: a deterministic, learnable synthetic corpus (a noisy linear
// recurrence over the vocabulary), the same for every layout.
void synthetic_sequence(std::uint64_t seed, std::int64_t sample, std::int64_t length,
                        std::int64_t vocab, std::int32_t* out);

} // namespace trident::executor
