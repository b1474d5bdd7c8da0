#pragma once
// FP8 training numerics in the CPU executor: every GEMM of a linear layer that runs in FP8
// (QKV or MLA's projections, output projection, MLP or shared experts, routed experts, an MTP
// module's eh_proj with its layer; not the router, embedding or head; not the BF16 first/last
// layers of --first-last-layers-bf16) reads its operands quantized → dequantized (kernels/cpu
// fp8.h), as Transformer Engine's FP8 GEMMs read them: inputs and weights in E4M3, output gradients
// in E5M2 under the hybrid format (E4M3 under e4m3). Accumulation stays fp32, as the tensor cores'
// does. Recipes (--fp8-recipe):
// - tensorwise (current scaling): each operand's scale from its own amax at the GEMM; the
//   amax is the whole tensor's, max-reduced over the tensor (expert-tensor) ranks that hold
//   its pieces and, for activations and gradients, the context ranks — so every layout scales
//   as one process does;
// - delayed: each operand's scale from the largest amax of the last amax_history steps
//   (Micikevicius et al. 2022; Transformer Engine's DelayedScaling, algorithm "max", margin 0),
//   1 on the first step as TE starts; a step's amaxes, max-reduced over the ranks sharing the
//   operand (tensor and data·context ranks; experts: expert-tensor and expert-data), enter the
//   history when the step ends;
// - blockwise (DeepSeek-V3 §3.3.1; TE's Float8BlockScaling): a scale per 1×128 block along the
//   GEMM's contraction dimension for inputs and gradients, per 128×128 tile for weights; no
//   reduction (a block on a tensor rank is the block of that rank's piece);
// - mxfp8 (OCP Microscaling; TE's MXFP8BlockScaling): a power-of-two (E8M0) scale per 32
//   consecutive values along the GEMM's contraction dimension for every operand, weights
//   included (1-D blocks only); the format as --fp8-format says (TE's default for MXFP8 is
//   e4m3 throughout). Blackwell runs these GEMMs natively; here they are quantize → dequantize
//   like the others, the reference a device path is tested against;
// - nvfp4 (Megatron-Core --fp4-format e2m1 --fp4-recipe nvfp4; TE's NVFP4BlockScaling,
//   kernels/cpu nvfp4.h): E2M1 values with an E4M3 scale per 16 (16×16 tiles for weights, 1×16
//   along the contraction dimension otherwise) under an fp32 scale from the whole tensor's amax
//   (max-reduced as tensorwise reduces it); gradients rounded stochastically, from a stream of
//   the step, the site and the operand; the weight gradient's operands (contracted over the
//   tokens) through the random Hadamard transform first.
#include "trident/core/job.h"
#include "trident/executor/gpt_chunk.h"
#include "trident/executor/process_groups.h"
#include "trident/executor/trainer.h"
#include "trident/kernels/fp8.h"
#include "trident/kernels/nvfp4.h"

#include <cstdint>
#include <deque>
#include <vector>

namespace trident::executor {

// The linear layers a layer's FP8 sites are numbered by (GptChunk::Linear): QKV, projection,
// fc1, fc2, MLA's four projections and an MTP module's eh_proj.
inline constexpr std::size_t kFp8DenseLinears = 9;

class Fp8Numerics {
public:
    enum class Operand { input, weight, gradient };
    // Where a quantized operand belongs: its chunk, layer (in the chunk), GEMM
    // (GptChunk::Linear: QKV, projection, fc1, fc2, MLA's q_down, q_up, kv_down, kv_up, MTP's
    // eh_proj) and
    // local routed expert (-1: none).
    struct Site {
        std::int32_t chunk = 0, layer = 0, linear = 0, expert = -1;
    };
    // `layers` and `experts`: per chunk of this rank, its layers and local routed experts.
    // `first_layers`: per chunk, the global index of its first layer (the histories' keys).
    Fp8Numerics(const core::JobSpec& job, const ProcessGroups& groups,
                std::vector<std::int32_t> layers, std::vector<std::int64_t> first_layers,
                std::int32_t experts);

    // x ([rows × cols], row-major) as an FP8 GEMM reads it when contracting over its columns
    // (`contract_rows` false) or its rows.
    Vec quantized(const Site& site, Operand operand, const float* x, std::int64_t rows,
                  std::int64_t cols, bool contract_rows);
    // Whether the coming passes record amaxes (training steps, not evaluation).
    void record(bool on) { recording_ = on; }
    // Delayed scaling: the step's amaxes into the histories; NVFP4: the next step's rounding
    // stream.
    void end_step();
    // Delayed scaling: the histories this rank speaks for (tensor and data rank 0 for dense
    // GEMMs, expert-tensor and expert-data rank 0 for experts' — the others hold the same),
    // and the restoring of saved ones by key (at most amax_history of each, the newest).
    std::vector<Fp8AmaxHistory> histories() const;
    void restore(const std::vector<Fp8AmaxHistory>& saved);

private:
    kernels::cpu::Fp8Kind kind(Operand operand) const;
    std::size_t slot(const Site& site, Operand operand) const;
    float reduced_amax(const Site& site, Operand operand, float amax) const;

    core::Fp8 fp8_;
    const ProcessGroups& groups_;
    std::vector<std::int32_t> layers_;       // per chunk
    std::vector<std::int64_t> first_layers_; // per chunk
    std::int32_t experts_ = 0;
    std::vector<std::size_t> chunk_base_;  // first dense slot of each chunk
    std::vector<std::size_t> expert_base_; // first expert slot of each chunk
    std::size_t dense_slots_ = 0;
    bool recording_ = false;
    std::uint64_t step_ = 0; // NVFP4's stochastic-rounding stream advances each step
    // Delayed: per slot (dense ones first, then the experts'), this step's amax and the last
    // steps' amaxes.
    std::vector<float> step_amax_;
    std::vector<std::deque<float>> history_;
};

} // namespace trident::executor
