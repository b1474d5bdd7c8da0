#include "trident/core/training_spec.h"

#include "limits.h"
#include "trident/core/spec_error.h"

#include <array>

namespace trident::core {
namespace {
constexpr std::array<std::string_view, 3> kDecayNames = {"constant", "linear", "cosine"};
}

std::string to_string(LrDecayStyle s) {
    return std::string(kDecayNames[int(s)]);
}

TrainingSpec training_from_json(const Json& j, std::int64_t default_seq_length,
                                const std::string& path) {
    using namespace limits;
    ObjectReader r(j, path);
    if (r.has("format")) r.expect_format("trident.training/1");
    TrainingSpec t;
    t.global_batch_size = r.integer("global_batch_size", 1, kMaxBatch);
    t.seq_length = r.integer_or("seq_length", default_seq_length, 1, kMaxPositions);
    t.train_iters = r.integer_or("train_iters", 1, 1, kMaxIters);
    t.lr.lr = r.number_or("lr", t.lr.lr, 0.0, 1.0e3);
    t.lr.min_lr = r.number_or("min_lr", t.lr.min_lr, 0.0, 1.0e3);
    t.lr.warmup_iters = r.integer_or("lr_warmup_iters", 0, 0, kMaxIters);
    t.lr.decay_iters = r.integer_or("lr_decay_iters", t.train_iters, 1, kMaxIters);
    t.lr.decay_style = static_cast<LrDecayStyle>(enum_index(
        r.string_or("lr_decay_style", "cosine"), kDecayNames, r.field("lr_decay_style")));
    t.weight_decay = r.number_or("weight_decay", t.weight_decay, 0.0, 1.0e3);
    t.clip_grad = r.number_or("clip_grad", t.clip_grad, 0.0, 1.0e9);
    t.adam_beta1 = r.number_or("adam_beta1", t.adam_beta1, 0.0, 0.999999);
    t.adam_beta2 = r.number_or("adam_beta2", t.adam_beta2, 0.0, 0.999999999);
    t.seed = r.integer_or("seed", t.seed, 0, INT32_MAX);
    r.finish();
    validate(t, path);
    return t;
}

void validate(const TrainingSpec& t, const std::string& path) {
    if (t.lr.min_lr > t.lr.lr) throw SpecError(path + ".min_lr", "must not exceed lr");
    if (t.lr.warmup_iters > t.lr.decay_iters)
        throw SpecError(path + ".lr_warmup_iters", std::to_string(t.lr.warmup_iters) +
                                                       " exceeds lr_decay_iters " +
                                                       std::to_string(t.lr.decay_iters));
}

Json to_json(const TrainingSpec& t) {
    Json j;
    j["global_batch_size"] = t.global_batch_size;
    j["seq_length"] = t.seq_length;
    j["train_iters"] = t.train_iters;
    j["lr"] = t.lr.lr;
    j["min_lr"] = t.lr.min_lr;
    j["lr_warmup_iters"] = t.lr.warmup_iters;
    // Left out when it is the default (train_iters), so a plan file run with another
    // --train-iters decays over the new length instead of the one the planner saw.
    if (t.lr.decay_iters != t.train_iters) j["lr_decay_iters"] = t.lr.decay_iters;
    j["lr_decay_style"] = to_string(t.lr.decay_style);
    j["weight_decay"] = t.weight_decay;
    j["clip_grad"] = t.clip_grad;
    j["adam_beta1"] = t.adam_beta1;
    j["adam_beta2"] = t.adam_beta2;
    j["seed"] = t.seed;
    return j;
}

} // namespace trident::core
