#include "fp8_numerics.h"

#include "trident/core/internal_error.h"

#include <algorithm>

namespace trident::executor {

namespace k = kernels::cpu;

namespace {

// Input, weight, gradient; every linear (kFp8DenseLinears); experts' fc1, fc2.
constexpr std::size_t kOperands = 3, kDenseLinears = kFp8DenseLinears, kExpertLinears = 2;
constexpr std::int64_t kBlock = 128; // DeepSeek-V3's 1×128 and 128×128

} // namespace

Fp8Numerics::Fp8Numerics(const core::JobSpec& job, const ProcessGroups& groups,
                         std::vector<std::int32_t> layers, std::vector<std::int64_t> first_layers,
                         std::int32_t experts)
    : fp8_(job.plan.fp8), groups_(groups), layers_(std::move(layers)),
      first_layers_(std::move(first_layers)), experts_(experts) {
    if (fp8_.recipe == core::Fp8Recipe::none)
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
    if (fp8_.recipe == core::Fp8Recipe::nvfp4) {
        k::Nvfp4Layout layout;
        layout.contract_rows = contract_rows && operand != Operand::weight;
        layout.square_blocks = operand == Operand::weight;
        layout.stochastic = operand == Operand::gradient;
        layout.hadamard = operand != Operand::weight && contract_rows;
        // A stream per step, site and operand (the same on every run of the same layout).
        layout.seed = (step_ << 32) ^ (std::uint64_t(slot(site, operand)) * 0x9E3779B97F4A7C15ull);
        const float amax = reduced_amax(site, operand, k::nvfp4_tensor_amax(x, rows, cols, layout));
        k::fake_quantize_nvfp4(out.data(), x, rows, cols, amax, layout);
        return out;
    }
    const k::Fp8Kind f = kind(operand);
    if (fp8_.recipe == core::Fp8Recipe::mxfp8) {
        k::fake_quantize_mx(out.data(), x, rows, cols, contract_rows, f);
        return out;
    }
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
    ++step_;
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

std::vector<Fp8AmaxHistory> Fp8Numerics::histories() const {
    std::vector<Fp8AmaxHistory> out;
    if (fp8_.recipe != core::Fp8Recipe::delayed) return out;
    const bool dense = groups_.tensor->rank() == 0 && groups_.data->rank() == 0;
    const bool expert = groups_.expert_tensor->rank() == 0 && groups_.expert_data->rank() == 0;
    const auto add = [&](const Site& site, std::int64_t global_expert) {
        for (std::size_t op = 0; op < kOperands; ++op) {
            const std::deque<float>& h = history_[slot(site, Operand(op))];
            out.push_back({first_layers_[std::size_t(site.chunk)] + site.layer,
                           site.linear,
                           global_expert,
                           std::int64_t(op),
                           {h.begin(), h.end()}});
        }
    };
    for (std::int32_t c = 0; c < std::int32_t(layers_.size()); ++c)
        for (std::int32_t l = 0; l < layers_[std::size_t(c)]; ++l) {
            if (dense)
                for (std::int32_t linear = 0; linear < std::int32_t(kDenseLinears); ++linear)
                    add({c, l, linear, -1}, -1);
            if (expert)
                for (std::int32_t e = 0; e < experts_; ++e)
                    for (std::int32_t linear = 2; linear < 4; ++linear) // fc1, fc2
                        add({c, l, linear, e}, std::int64_t(groups_.coord.ep) * experts_ + e);
        }
    return out;
}

void Fp8Numerics::restore(const std::vector<Fp8AmaxHistory>& saved) {
    if (fp8_.recipe != core::Fp8Recipe::delayed) return;
    for (const Fp8AmaxHistory& h : saved) {
        if (h.operand < 0 || h.operand >= std::int64_t(kOperands)) continue;
        const std::int64_t ep_first = std::int64_t(groups_.coord.ep) * experts_;
        if (h.expert >= 0 && (h.expert < ep_first || h.expert >= ep_first + experts_)) continue;
        for (std::size_t c = 0; c < layers_.size(); ++c) {
            const std::int64_t l = h.layer - first_layers_[c];
            if (l < 0 || l >= layers_[c]) continue;
            const Site site{std::int32_t(c), std::int32_t(l), std::int32_t(h.linear),
                            h.expert < 0 ? -1 : std::int32_t(h.expert - ep_first)};
            std::deque<float>& into = history_[slot(site, Operand(h.operand))];
            const std::size_t keep = std::min(
                h.amaxes.size(), std::size_t(std::max<std::int64_t>(fp8_.amax_history, 0)));
            into.assign(h.amaxes.end() - std::ptrdiff_t(keep), h.amaxes.end());
        }
    }
}

} // namespace trident::executor
