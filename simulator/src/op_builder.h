#pragma once
// The builder of operation lists shared by layer_ops.cpp (attention, dense MLP, embedding,
// head), moe_ops.cpp (router, token exchange, experts) and mtp_ops.cpp (multi-token
// prediction): linear layers with their F/B/W GEMMs and FP8 casts, memory-bound kernels,
// tensor-parallel region entry and exit, and the recomputation of modules. Internal to the
// simulator.
#include "trident/simulator/layer_ops.h"

#include <array>
#include <optional>
#include <string_view>
#include <vector>

namespace trident::simulator::detail {

using core::Collective;
using core::GroupKind;
using core::MemoryKernel;

// Bytes of one activation element: the parameters' dtype (bf16 on GPUs, fp32 on the CPU backend).
inline double element_bytes(const core::ModelSpec& m) {
    return double(core::dtype_bytes(m.precision.params));
}

struct Builder {
    std::vector<Op>& ops;
    const LayerView& v;
    bool full_recompute = false; // repeat every forward op inside the backward
    double bias_bytes = 0.0;     // bytes per element of a linear layer's bias traffic (0: no bias)
    bool module_recompute = false; // inside a module selective recomputation rebuilds
    // Collectives of a tensor-parallel region's entry, waiting for the linear layer after them:
    // their index and the phase of that layer's GEMM each meets (Op::partner).
    std::vector<std::pair<std::size_t, Phase>> awaiting_linear = {};
    // The F, B and W GEMMs of the last linear layer (a region's exit meets them).
    std::array<std::int32_t, 3> last_linear = {-1, -1, -1};

    void push(Op op) {
        ops.push_back(op);
        if ((full_recompute || module_recompute) && op.phase == Phase::forward) {
            op.phase = Phase::backward_input;
            op.recompute = true;
            ops.push_back(op);
        }
    }

    // A linear layer: forward, input gradient (dgrad) and weight gradient (wgrad). Under an
    // FP8 recipe (and unless `bf16`: the router) its three GEMMs run in FP8 after casting the
    // input (forward) and the output gradient (backward), each with its transpose for wgrad.
    // `groups` > 1: that many such layers (MoE experts), m tokens each, as one grouped GEMM.
    void linear(std::string_view name, std::int64_t m, std::int64_t n, std::int64_t k,
                bool bf16 = false, std::int64_t groups = 1) {
        if (m <= 0 || n <= 0 || k <= 0) return;
        const double flops = 2.0 * double(m) * double(n) * double(k), g = double(groups);
        const bool fp8 = v.fp8 != core::Fp8Recipe::none && !bf16;
        if (fp8)
            memory("fp8 cast", MemoryKernel::elementwise,
                   fp8_cast_bytes(v.fp8, g * double(m) * double(k)),
                   fp8_cast_bytes(v.fp8, g * double(m) * double(n)));
        const auto gemm = [&](Phase phase, std::int64_t rows, std::int64_t cols,
                              std::int64_t depth) {
            return Op{.name = name,
                      .kind = OpKind::gemm,
                      .phase = phase,
                      .fp8 = fp8,
                      .grouped = groups > 1,
                      .count = groups,
                      .m = rows,
                      .n = cols,
                      .k = depth,
                      .flops = flops};
        };
        const auto at = [&] { return std::int32_t(ops.size()); };
        last_linear[0] = at();
        push(gemm(Phase::forward, m, n, k));
        last_linear[1] = at();
        ops.push_back(gemm(Phase::backward_input, m, k, n));
        last_linear[2] = at();
        // wgrad reduces over the tokens: per group a k×n result of depth m.
        ops.push_back(gemm(Phase::backward_weight, k, n, m));
        for (const auto& [index, phase] : awaiting_linear)
            ops[index].partner = last_linear[std::size_t(phase)];
        awaiting_linear.clear();
        // A bias is broadcast over the output in the forward and summed over the tokens for
        // its gradient (memory traffic the GEMM tables do not hold).
        if (bias_bytes > 0)
            memory(name, MemoryKernel::elementwise, bias_bytes * g * double(m) * double(n),
                   bias_bytes * g * double(m) * double(n), Phase::backward_weight);
    }

    // `backward_kernel`: the backward's own kernel where it differs (the activations').
    void memory(std::string_view name, MemoryKernel kernel, double forward_bytes,
                double backward_bytes, Phase backward_phase = Phase::backward_input,
                std::optional<MemoryKernel> backward_kernel = std::nullopt) {
        if (forward_bytes > 0)
            push({.name = name,
                  .kind = OpKind::memory_bound,
                  .phase = Phase::forward,
                  .kernel = kernel,
                  .bytes = forward_bytes});
        if (backward_bytes > 0)
            ops.push_back({.name = name,
                           .kind = OpKind::memory_bound,
                           .phase = backward_phase,
                           .kernel = backward_kernel.value_or(kernel),
                           .bytes = backward_bytes});
    }

    // `domain_copy_bytes`: a DeepEP all-to-all's bytes per destination domain (Op). Returns the
    // operation's index (-1: none, no bytes).
    std::int32_t collective(std::string_view name, Collective c, GroupKind group, double bytes,
                            Phase phase, double domain_copy_bytes = 0.0) {
        if (bytes <= 0) return -1;
        Op op{.name = name,
              .kind = OpKind::collective,
              .phase = phase,
              .collective = c,
              .group = group,
              .bytes = bytes,
              .domain_copy_bytes = domain_copy_bytes};
        const auto index = std::int32_t(ops.size());
        if (phase == Phase::forward)
            push(op);
        else
            ops.push_back(op);
        return index;
    }

    // A tensor-parallel collective with its pairing; its index, -1 for none (no bytes).
    std::int32_t tp_collective(std::string_view name, Collective c, double bytes, Phase phase,
                               TpPairing pairing) {
        const std::int32_t i = collective(name, c, GroupKind::tensor, bytes, phase);
        if (i >= 0) ops[std::size_t(i)].pairing = pairing;
        return i;
    }
    // A tensor-parallel collective meeting the next linear layer's GEMM of `gemm_phase`.
    void before_linear(std::string_view name, Collective c, double bytes, Phase phase,
                       Phase gemm_phase, TpPairing pairing) {
        const std::int32_t i = tp_collective(name, c, bytes, phase, pairing);
        if (i >= 0) awaiting_linear.emplace_back(std::size_t(i), gemm_phase);
    }
    // One meeting the last linear layer's GEMM of `gemm_phase`.
    void after_linear(std::string_view name, Collective c, double bytes, Phase phase,
                      Phase gemm_phase, TpPairing pairing) {
        const std::int32_t i = tp_collective(name, c, bytes, phase, pairing);
        if (i >= 0) ops[std::size_t(i)].partner = last_linear[std::size_t(gemm_phase)];
    }

    // Entering a tensor-parallel region (before a column-parallel GEMM). Under sequence
    // parallelism the layer keeps its input sharded, so the backward gathers it again for the
    // weight gradient beside the dgrad GEMM, and reduce-scatters the input gradient beside the
    // wgrad GEMM (Korthikanti et al. 2022 §4.2.2; Megatron-Core's and Transformer Engine's
    // linear layers); without it the input gradient's all-reduce runs beside the wgrad GEMM.
    void enter_tp(std::string_view name, double bytes) {
        if (v.tp == 1) return;
        if (v.sequence_parallel) {
            before_linear(name, Collective::all_gather, bytes, Phase::forward, Phase::forward,
                          TpPairing::gather_into);
            before_linear(name, Collective::all_gather, bytes, Phase::backward_input,
                          Phase::backward_input, TpPairing::beside);
            before_linear(name, Collective::reduce_scatter, bytes, Phase::backward_input,
                          Phase::backward_weight, TpPairing::beside);
        } else {
            before_linear(name, Collective::all_reduce, bytes, Phase::backward_input,
                          Phase::backward_weight, TpPairing::beside);
        }
    }

    // Leaving it (after a row-parallel GEMM).
    void leave_tp(std::string_view name, double bytes) {
        if (v.tp == 1) return;
        if (v.sequence_parallel) {
            after_linear(name, Collective::reduce_scatter, bytes, Phase::forward, Phase::forward,
                         TpPairing::scatter_out);
            after_linear(name, Collective::all_gather, bytes, Phase::backward_input,
                         Phase::backward_input, TpPairing::gather_into);
        } else {
            collective(name, Collective::all_reduce, GroupKind::tensor, bytes, Phase::forward);
        }
    }
};

// While alive, the forward operations pushed are repeated inside the backward when the layer
// selectively recomputes `module` (Megatron-Core's --recompute-modules).
class RecomputedModule {
public:
    RecomputedModule(Builder& b, const LayerView& v, core::RecomputeModule module)
        : b_(b), was_(b.module_recompute) {
        b_.module_recompute = was_ || v.recomputes(module);
    }
    ~RecomputedModule() { b_.module_recompute = was_; }
    RecomputedModule(const RecomputedModule&) = delete;
    RecomputedModule& operator=(const RecomputedModule&) = delete;

private:
    Builder& b_;
    bool was_;
};

inline MemoryKernel norm_kernel(const core::ModelSpec& m) {
    return m.normalization == core::Normalization::layernorm ? MemoryKernel::layernorm
                                                             : MemoryKernel::rmsnorm;
}

// Bytes of a norm over `tokens × width`: forward reads x, writes y; backward reads x and dy,
// writes dx.
inline void norm(Builder& b, const core::ModelSpec& m, std::string_view name, double tokens,
                 double width) {
    const double x = tokens * width * element_bytes(m);
    b.memory(name, norm_kernel(m), 2 * x, 3 * x);
}

// Residual add (with dropout when the model uses it).
inline void residual(Builder& b, const core::ModelSpec& m, std::string_view name, double tokens,
                     double h) {
    const double x = tokens * h * element_bytes(m);
    const double mask = m.dropout ? tokens * h : 0.0;
    b.memory(name, MemoryKernel::elementwise, 3 * x + mask, 2 * x + mask);
}

// `act_module`: the recomputation module that rebuilds the activation (moe_act for experts).
inline void mlp(Builder& b, const core::ModelSpec& m, const LayerView& v,
                std::string_view prefix_fc1, std::string_view prefix_fc2, std::string_view act_name,
                std::int64_t tokens, std::int64_t width, std::int64_t tp, std::int64_t groups = 1,
                std::optional<core::RecomputeModule> act_module = std::nullopt) {
    const bool swiglu = m.activation == core::Activation::swiglu;
    const std::int64_t local = width / tp;
    b.linear(prefix_fc1, tokens, (swiglu ? 2 : 1) * local, m.hidden_size, false, groups);
    const double y = double(groups) * double(tokens) * double(local) * element_bytes(m);
    // GeLU reads x, writes y; SwiGLU reads gate and up (2y), writes y. Backward reads what the
    // forward read plus dy and writes the input gradient.
    {
        const RecomputedModule act(b, act_module ? v : LayerView{},
                                   act_module.value_or(core::RecomputeModule::core_attn));
        if (swiglu)
            b.memory(act_name, MemoryKernel::swiglu, 3 * y, 5 * y, Phase::backward_input,
                     MemoryKernel::swiglu_backward);
        else
            b.memory(act_name, MemoryKernel::gelu, 2 * y, 3 * y, Phase::backward_input,
                     MemoryKernel::gelu_backward);
    }
    b.linear(prefix_fc2, tokens, m.hidden_size, local, false, groups);
}

// An MoE block (router, dispatch, experts, combine, shared experts) of `tokens` tokens, the
// router seeing `norm_tokens` of them (sequence parallelism).
void moe(Builder& b, const core::ModelSpec& m, const LayerView& v, std::int64_t tokens,
         std::int64_t norm_tokens);

} // namespace trident::simulator::detail
