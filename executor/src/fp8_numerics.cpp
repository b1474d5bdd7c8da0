#include "fp8_numerics.h"

#include "trident/core/internal_error.h"

#include <algorithm>

namespace trident::executor {

namespace k = kernels::cpu;

namespace {

// QKV, projection, fc1, fc2 and MLA's four projections (GptChunk::Linear); experts' fc1, fc2.
constexpr std::size_t kOperands = 3, kDenseLinears = 8, kExpertLinears = 2;
constexpr std::int64_t kBlock = 128; // DeepSeek-V3's 1×128 and 128×128

} // namespace

Fp8Numerics::Fp8Numerics(const core::JobSpec& job, const ProcessGroups& groups,
                         std::vector<std::int32_t> layers, std::int32_t experts)
    : fp8_(job.plan.fp8), groups_(groups), layers_(std::move(layers)), experts_(experts) {
    if (fp8_.recipe != core::Fp8Recipe::tensorwise && fp8_.recipe != core::Fp8Recipe::delayed &&
        fp8_.recipe != core::Fp8Recipe::blockwise)
        throw core::InternalError("Fp8Numerics: recipe " + core::precision_name(fp8_.recipe));
    for (std::int32_t n : layers_) {
        chunk_base_.push_back(dense_slots_);
        dense_slots_ += std::size_t(n) * kDenseLinears * kOperands;
    }
    std::size_t slots = dense_slots_;
    for (std::int32_t n : layers_) {
        expert_base_.push_back(slots);
        slots += std::size_t(n) * std::size_t(experts_) * kExpertLinears * kOperands;
    }
    step_amax_.assign(slots, 0.0f);
    history_.resize(slots);
}

k::Fp8Kind Fp8Numerics::kind(Operand operand) const {
    return operand == Operand::gradient && fp8_.format == core::Fp8Format::hybrid
               ? k::Fp8Kind::e5m2
               : k::Fp8Kind::e4m3;
}

std::size_t Fp8Numerics::slot(const Site& s, Operand operand) const {
    const std::size_t c = std::size_t(s.chunk), op = std::size_t(operand);
    if (s.expert < 0)
        return chunk_base_.at(c) +
               (std::size_t(s.layer) * kDenseLinears + std::size_t(s.linear)) * kOperands + op;
    const std::size_t linear = std::size_t(s.linear) - 2; // fc1, fc2
    return expert_base_.at(c) +
           ((std::size_t(s.layer) * std::size_t(experts_) + std::size_t(s.expert)) *
                kExpertLinears +
            linear) *
               kOperands +
           op;
}

float Fp8Numerics::reduced_amax(const Site& s, Operand operand, float amax) const {
    // The whole tensor's amax: its pieces live on the tensor (experts: expert-tensor) ranks,
    // and an activation's or gradient's rows on the context ranks.
    if (s.expert >= 0) {
        groups_.expert_tensor->all_reduce_max(&amax, 1);
        return amax;
    }
    groups_.tensor->all_reduce_max(&amax, 1);
    if (operand != Operand::weight) groups_.context->all_reduce_max(&amax, 1);
    return amax;
}

Vec Fp8Numerics::quantized(const Site& site, Operand operand, const float* x, std::int64_t rows,
                           std::int64_t cols, bool contract_rows) {
    Vec out(static_cast<std::size_t>(rows * cols));
    const k::Fp8Kind f = kind(operand);
    if (fp8_.recipe == core::Fp8Recipe::blockwise) {
        const bool tile = operand == Operand::weight;
        const std::int64_t block_rows = tile || contract_rows ? kBlock : 1,
                           block_cols = tile || !contract_rows ? kBlock : 1;
        k::fake_quantize_blocks(out.data(), x, rows, cols, block_rows, block_cols, f);
        return out;
    }
    const float local = k::abs_max(x, rows * cols);
    float scale = 1.0f;
    if (fp8_.recipe == core::Fp8Recipe::tensorwise) {
        scale = k::fp8_scale(reduced_amax(site, operand, local), f);
    } else { // delayed: the history's largest amax (1 while the history is empty)
        const std::size_t i = slot(site, operand);
        if (!history_[i].empty())
            scale = k::fp8_scale(*std::max_element(history_[i].begin(), history_[i].end()), f);
        if (recording_) step_amax_[i] = std::max(step_amax_[i], local);
    }
    k::fake_quantize(out.data(), x, rows * cols, scale, f);
    return out;
}

void Fp8Numerics::end_step() {
    if (fp8_.recipe != core::Fp8Recipe::delayed) return;
    // One max over the ranks sharing each operand: dense slots over the tensor and data ×
    // context ranks, the experts' over the expert-tensor and expert-data ranks.
    float* dense = step_amax_.data();
    float* expert = step_amax_.data() + dense_slots_;
    const std::size_t experts = step_amax_.size() - dense_slots_;
    if (dense_slots_ > 0) {
        groups_.tensor->all_reduce_max(dense, dense_slots_);
        groups_.data->all_reduce_max(dense, dense_slots_);
    }
    if (experts > 0) {
        groups_.expert_tensor->all_reduce_max(expert, experts);
        groups_.expert_data->all_reduce_max(expert, experts);
    }
    for (std::size_t i = 0; i < step_amax_.size(); ++i) {
        history_[i].push_back(step_amax_[i]);
        while (std::int64_t(history_[i].size()) > fp8_.amax_history) history_[i].pop_front();
        step_amax_[i] = 0.0f;
    }
}

} // namespace trident::executor
