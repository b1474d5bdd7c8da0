#pragma once
// TrainingSpec: batch, sequence and optimisation schedule (Megatron names in snake_case).
#include "trident/core/json_io.h"

#include <cstdint>
#include <string>

namespace trident::core {

enum class LrDecayStyle { constant, linear, cosine };
std::string to_string(LrDecayStyle s);

struct LrSchedule {
    double lr = 3.0e-4;
    double min_lr = 3.0e-5;
    std::int64_t warmup_iters = 0;
    std::int64_t decay_iters = 0; // 0 in JSON means "train_iters"
    LrDecayStyle decay_style = LrDecayStyle::cosine;
};

struct TrainingSpec {
    std::int64_t global_batch_size = 0; // sequences per optimiser step
    std::int64_t seq_length = 0;        // tokens per sequence
    std::int64_t train_iters = 0;
    LrSchedule lr;
    double weight_decay = 0.1;
    double clip_grad = 1.0;
    double adam_beta1 = 0.9;
    double adam_beta2 = 0.95;
    std::int64_t seed = 1234;

    std::int64_t tokens_per_step() const { return global_batch_size * seq_length; }
};

// `default_seq_length` fills seq_length when absent (the model's max_position_embeddings).
TrainingSpec training_from_json(const Json& j, std::int64_t default_seq_length,
                                const std::string& path = "training");
Json to_json(const TrainingSpec& t);
void validate(const TrainingSpec& t, const std::string& path = "training");

} // namespace trident::core
