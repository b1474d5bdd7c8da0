#pragma once
// The operations of one transformer layer (and of the embedding and the LM head) for one
// micro-batch on one rank, with their shapes under the plan's tensor (tp), sequence (sp),
// context (cp) and expert (ep) parallelism. The cost model times these with a Profile; the
// FLOP counters sum them with every degree at 1. One list, so time and FLOPs cannot disagree.
#include "trident/core/job.h"
#include "trident/core/model_spec.h"
#include "trident/core/parallel_plan.h"
#include "trident/core/profile.h"
#include "trident/core/rank_grid.h"

#include <cstdint>
#include <string_view>
#include <vector>

namespace trident::simulator {

enum class OpKind { gemm, attention, memory_bound, collective };
// F, B (input gradient, recomputation included) and W (weight gradient): the parts the
// schedules place separately.
enum class Phase { forward, backward_input, backward_weight };

// How a tensor-parallel collective meets the GEMM of its linear layer (Op::partner):
//   gather_into  the all-gather of the GEMM's input (forward of a column-parallel layer, the
//                output gradient before a row-parallel layer's dgrad): the GEMM waits for it,
//                except where Transformer Engine's userbuffers interleave them (ring exchange);
//   scatter_out  the reduce-scatter of a row-parallel layer's forward output: after the GEMM,
//                except under userbuffers (the GEMM in chunks, each scattered as the next runs);
//   beside       the backward's collectives that need not wait: the re-gather of a column-
//                parallel layer's input (for wgrad) beside its dgrad, and the reduce-scatter
//                (all-reduce without sequence parallelism) of its input gradient beside its
//                wgrad — Megatron-Core and Transformer Engine launch them asynchronously.
enum class TpPairing { none, gather_into, scatter_out, beside };

struct Op {
    std::string_view name;
    OpKind kind = OpKind::gemm;
    Phase phase = Phase::forward;
    bool recompute = false; // repeated forward work inside the backward (not model FLOPs)
    bool fp8 = false;       // a GEMM of an FP8 linear layer (timed on the fp8 table)
    bool grouped = false;   // gemm: `count` GEMMs, each with its own B, in one grouped kernel
    std::int64_t count = 1; // identical repetitions (a batched GEMM's matrices)
    // gemm: C[m×n] = A[m×k]·B[k×n]
    std::int64_t m = 0, n = 0, k = 0;
    // attention core (flash)
    std::int64_t batch_heads = 0, seq = 0, head_dim = 0;
    bool causal = true;
    double work_fraction = 1.0; // share of the full attention this rank computes (cp)
    // memory-bound kernel
    core::MemoryKernel kernel = core::MemoryKernel::elementwise;
    // collective over a process group
    core::Collective collective = core::Collective::all_reduce;
    core::GroupKind group = core::GroupKind::tensor;
    double bytes = 0.0; // memory-bound: bytes moved; collective: nccl-tests buffer size
    // A DeepEP all-to-all (flex dispatcher): the bytes a rank sends to each destination NVLink
    // domain when its group spans several — sent once per domain over the network and
    // forwarded inside it (DeepEP's internode kernels); `bytes` then is the NVLink leg. 0: not.
    double domain_copy_bytes = 0.0;
    // FLOPs in the Narayanan et al. convention (GEMMs and the attention core; the full s²
    // attention, not halved for the causal mask), per repetition.
    double flops = 0.0;
    // A tensor-parallel collective: the index in its operation list of the GEMM it meets, and
    // how (the cost model times the pair; -1: none).
    std::int32_t partner = -1;
    TpPairing pairing = TpPairing::none;
};

// How one rank sees a layer: degrees that split it and the tokens of one micro-batch.
struct LayerView {
    std::int64_t tp = 1, cp = 1, ep = 1;
    std::int64_t etp = 1; // the experts' tensor split (ParallelPlan::expert_tp())
    bool sequence_parallel = false;
    std::int64_t micro_batch = 1; // sequences
    std::int64_t seq = 1;         // full sequence length (before cp)
    core::RecomputeGranularity recompute = core::RecomputeGranularity::none;
    // Selective recomputation's modules (core::Recompute::modules).
    std::uint32_t recompute_modules = core::module_bit(core::RecomputeModule::core_attn);
    bool flash_attention = true;
    core::TokenDispatcher dispatcher = core::TokenDispatcher::alltoall; // MoE layers
    // The FP8 recipe of this layer's linear layers (none: the parameters' dtype). Set per
    // layer by the callers (JobSpec::layer_fp8), not by of().
    core::Fp8Recipe fp8 = core::Fp8Recipe::none;

    // Whether this layer's backward rebuilds module `m` (selective recomputation).
    bool recomputes(core::RecomputeModule m) const {
        return recompute == core::RecomputeGranularity::selective &&
               (recompute_modules & core::module_bit(m)) != 0;
    }
    // What the layer's operations depend on in its recomputation: granularity and modules.
    int recompute_key() const {
        return recompute == core::RecomputeGranularity::selective
                   ? int(recompute) + 4 * int(recompute_modules)
                   : int(recompute);
    }
    // Tokens of one micro-batch on this rank (context parallelism splits the sequence).
    std::int64_t tokens() const { return micro_batch * seq / cp; }
    // Tokens one expert-tp group routes: the tp group's when etp = tp; under MoE parallel
    // folding each rank routes its sequence-parallel share, etp of them together.
    std::int64_t expert_tokens() const { return etp == tp ? tokens() : tokens() / tp * etp; }

    static LayerView of(const core::ParallelPlan& plan, std::int64_t seq_length);
    // The whole model on one device: what model FLOPs count.
    static LayerView global(std::int64_t sequences, std::int64_t seq_length);
};

// Bytes one FP8 cast of `elements` moves: read 16-bit, write the FP8 copy and its transpose
// (Transformer Engine's cast_transpose); the current-scaling recipe reads once more for its
// amax, the block recipes write their scales.
double fp8_cast_bytes(core::Fp8Recipe recipe, double elements);
// Casting `weights` FP8 linear weights for use: cast and transpose from the 16-bit weight, or —
// under the FP8 parameter gather, where the weight already is FP8 — the transpose alone.
double fp8_weight_cast_bytes(const core::Fp8& fp8, double weights);

// Routed token copies one rank's experts take in an MoE layer: the expert-tp group's tokens, top-k
// each, padded to the capacity factor, times the busiest expert-parallel rank's load
// (moe.load_balance). The cost model times them and the memory model holds them.
double routed_copies(const core::MoeSpec& e, const LayerView& v);

std::vector<Op> layer_ops(const core::ModelSpec& m, const LayerView& v, std::int64_t layer);
// Word (and learned position) embedding: first virtual stage.
std::vector<Op> embedding_ops(const core::ModelSpec& m, const LayerView& v,
                              std::int64_t padded_vocab);
// Final norm, LM head and vocabulary-parallel softmax cross-entropy: last virtual stage.
std::vector<Op> head_ops(const core::ModelSpec& m, const LayerView& v, std::int64_t padded_vocab);
// Multi-token-prediction module `depth` (0-based; model.mtp_num_layers of them, after the head
// on the last virtual stage): the embedding lookup of the shifted tokens, two norms and the
// 2h → h projection, its transformer layer (num_layers + depth) with `v`'s recomputation and
// FP8 recipe, its final norm, the shared LM head and the loss.
std::vector<Op> mtp_ops(const core::ModelSpec& m, const LayerView& v, std::int64_t padded_vocab,
                        std::int64_t depth);
// How an MTP module's layer runs: `base` with the recomputation of a chunk's first layer and
// the FP8 recipe of layer num_layers + depth.
LayerView mtp_view(const core::JobSpec& job, LayerView base, std::int64_t depth);

} // namespace trident::simulator
