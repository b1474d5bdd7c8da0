#pragma once
// Where every tensor of the model lives: for one model chunk of one (pipeline rank, tensor rank,
// expert rank), the table of its tensors — what each is, its full shape, which part of it this
// rank holds, how the optimizer and the gradient sums treat it, and how it is initialised. The
// one place the sharding rules are written (Shoeybi et al. 2019 for tensor parallelism,
// Narayanan et al. 2021 for the virtual stages, Megatron-Core for experts and padding):
// - QKV and the first MLP GEMM column-parallel (this rank's query heads and KV groups; SwiGLU's
//   gate and up halves each split), the output projection and second MLP GEMM row-parallel,
//   their biases added once after the sum (replicated);
// - norms, the router and the learned position table replicated over tensor ranks;
// - the word embedding and the output layer split by vocabulary rows, the vocabulary padded to a
//   multiple of make_vocab_size_divisible_by · tp (padding rows belong to no full tensor);
// - routed experts: this expert rank's experts, each split over tensor ranks as a dense MLP;
// - a tied embedding on two stages: the last stage keeps a copy, summed with the first's;
// - multi-token prediction on the last stage, with a copy of the word embedding there when the
//   first stage is elsewhere (Megatron-Core builds the embedding wherever MTP runs).
// Readers: both executors' model chunks (allocation, initialisation, lookup by role),
// checkpoints (through the placement), the simulator's per-stage parameter counts and the
// executors' memory checks.
#include "trident/core/job.h"

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace trident::core {

// How the optimizer and the gradient sums treat one tensor.
struct TensorFlags {
    bool decay = false;            // weight decay applies (matrices, not norms or biases)
    bool tp_replicated = false;    // every tensor rank holds the same values
    bool duplicate = false;        // a copy kept in sync (the last stage's tied embedding)
    bool sequence_partial = false; // under sequence parallelism each tensor rank holds a
                                   // partial gradient (norms): summed over the tensor group
    bool expert = false;           // a routed expert's: reduced over the expert-data group
    bool tensor_partial = false;   // whole on every tensor rank but each rank's gradient
                                   // partial (MLA's down projections and latent norms: each
                                   // rank backpropagates its heads): summed over the tensor
                                   // group
    bool tied_embedding = false;   // the tied word embedding or its last-stage copy: both
                                   // take the sum of their gradients over the embedding group
};

enum class TensorRole : std::uint8_t {
    word_embedding,
    position_embedding,
    norm1_weight,
    norm1_bias,
    qkv_weight,
    qkv_bias,
    mla_q_down, // MLA: hidden → q latent (q_lora_rank > 0)
    mla_q_norm, // MLA: the q latent's norm (weight)
    mla_q_norm_bias,
    mla_q_up,    // MLA: q latent (or hidden) → per-head queries
    mla_kv_down, // MLA: hidden → kv latent and the shared rotary key
    mla_kv_norm, // MLA: the kv latent's norm (weight)
    mla_kv_norm_bias,
    mla_kv_up,   // MLA: kv latent → per-head keys and values
    proj_weight, // attention output projection
    proj_bias,
    norm2_weight,
    norm2_bias,
    fc1_weight,
    fc1_bias,
    fc2_weight,
    fc2_bias,
    router_weight,
    shared_fc1_weight, // DeepSeekMoE's always-active experts, as one MLP
    shared_fc1_bias,
    shared_fc2_weight,
    shared_fc2_bias,
    expert_fc1_weight,
    expert_fc1_bias,
    expert_fc2_weight,
    expert_fc2_bias,
    final_norm_weight,
    final_norm_bias,
    output_weight, // the LM head: untied, or the last stage's copy of a tied embedding
    // A multi-token-prediction module (its layer index num_layers + depth; its transformer
    // layer's tensors use the roles above): norms of the embedding and of the hidden state,
    // the 2h → h projection of both (column-parallel), and its final norm.
    mtp_enorm_weight,
    mtp_enorm_bias,
    mtp_hnorm_weight,
    mtp_hnorm_bias,
    mtp_eh_proj,
    mtp_final_norm_weight,
    mtp_final_norm_bias,
};

enum class TensorInit : std::uint8_t { normal, ones, zeros };

struct TensorLayout {
    TensorRole role = TensorRole::word_embedding;
    std::int64_t layer = -1;  // the transformer layer (-1: embedding, final norm, head)
    std::int64_t expert = -1; // a routed expert's global index
    std::int64_t full_rows = 0, full_cols = 1; // the whole tensor, [rows × cols]
    std::int64_t size = 0;                     // elements this rank stores (padding included)
    // Runs (offset in the full tensor, length) this rank stores, in its storage order; their
    // lengths add up to `size` less any padding rows.
    std::vector<std::pair<std::int64_t, std::int64_t>> placement;
    TensorFlags flags;
    TensorInit init = TensorInit::zeros;
    double init_std = 0.0; // normal: the standard deviation

    std::int64_t full_size() const { return full_rows * full_cols; }
    std::string name() const; // "layer.3.qkv.weight", "embedding.word.tied_copy", …
    std::string
    init_name() const; // the name its values are generated from (a copy: the original's)
};

// The per-rank sizes of one model chunk, spelled out.
struct ChunkShape {
    std::int32_t pipeline_rank = 0, chunk = 0, virtual_stage = 0;
    std::int64_t tp = 1, tp_rank = 0, ep_rank = 0;
    std::int64_t etp = 1, etp_rank = 0; // the experts' tensor split (expert_tp(), tp by default)
    bool first = false, last = false;   // holds the embedding / the final norm, head and loss
    std::int64_t first_layer = 0, layers = 0;
    std::int64_t micro_batch = 0;    // sequences per micro-batch
    std::int64_t sequence = 0;       // tokens per sequence
    std::int64_t local_sequence = 0; // of them on this context rank
    std::int64_t tokens = 0;         // micro_batch · local_sequence: rows inside TP regions
    std::int64_t rows = 0;           // rows outside them (tokens / tp under sequence parallelism)
    std::int64_t first_row = 0;      // this rank's first row of those (sequence parallelism)
    std::int64_t hidden = 0, head_dim = 0;
    std::int64_t local_heads = 0, local_kv_groups = 0, local_ffn = 0;
    std::int64_t vocab = 0, padded_vocab = 0, local_vocab = 0, vocab_start = 0;
    std::int64_t local_experts = 0, first_expert = 0, local_expert_ffn = 0;

    // `etp_rank`: the rank's expert-tensor index (RankCoord::etp); -1 takes tp_rank mod etp,
    // which is it when etp divides tp.
    static ChunkShape of(const JobSpec& job, std::int32_t pipeline_rank, std::int32_t chunk,
                         std::int64_t tp_rank, std::int64_t ep_rank, std::int64_t cp = 1,
                         std::int64_t etp_rank = -1);
};

// The parameters of one FSDP unit on one rank — what ZeRO-3 gathers at once: the embedding, a
// transformer layer, or the final norm with the head. `fp8`: of them, FP8 linear weights, and
// `fp8_expert` of those the routed experts'.
struct ShardUnit {
    std::int64_t dense = 0, expert = 0, fp8 = 0, fp8_expert = 0;
    std::int64_t total() const { return dense + expert; }
};

// What a ChunkLayout keeps: every tensor with its placement, or only the parameter counts (the
// simulator asks for those for every candidate layout; the same rules, no allocation).
enum class LayoutDetail { tensors, counts };

class ChunkLayout {
public:
    ChunkLayout(const JobSpec& job, std::int32_t pipeline_rank, std::int32_t chunk,
                std::int64_t tp_rank, std::int64_t ep_rank, std::int64_t cp = 1,
                LayoutDetail detail = LayoutDetail::tensors, std::int64_t etp_rank = -1);

    const ChunkShape& shape() const { return shape_; }
    const std::vector<TensorLayout>& tensors() const { return tensors_; }
    // Index into tensors() of (role, layer, expert); -1 when this chunk has no such tensor.
    std::int64_t find(TensorRole role, std::int64_t layer = -1, std::int64_t expert = -1) const;
    // Parameters stored: all, and those of routed experts.
    std::int64_t parameters() const { return parameters_; }
    std::int64_t expert_parameters() const { return expert_parameters_; }
    // Weights of the linear layers that run in FP8 under the plan's recipe (QKV/MLA
    // projections, output projection, MLP and experts; not the router, embedding or head;
    // none in the BF16 first/last layers): what holds FP8 copies.
    std::int64_t fp8_parameters() const { return fp8_parameters_; }
    // The chunk's FSDP units in forward order: the embedding (first chunk), each layer, the
    // final norm and head (last chunk).
    const std::vector<ShardUnit>& units() const { return units_; }
    // The unit (index into units()) tensors()[tensor] belongs to (LayoutDetail::tensors).
    std::int32_t unit_of(std::size_t tensor) const;

private:
    void add(TensorLayout t);
    void add_norm(TensorRole weight, TensorRole bias, std::int64_t layer, std::int64_t width,
                  bool sequence_partial);
    void add_layer(std::int64_t layer);
    void add_attention(std::int64_t layer);
    void add_mlp(std::int64_t layer, std::int64_t ffn, std::int64_t local_ffn,
                 TensorRole first_role, std::int64_t expert, bool is_expert);
    void add_vocab_table(TensorRole role, bool duplicate, bool tied);
    // The MTP modules after the head (last stage), one FSDP unit each.
    void add_mtp_modules();
    // Closes an FSDP unit: the tensors added since the previous one.
    void close_unit(ShardUnit unit);
    // Whether any chunk of this chunk's pipeline rank is the first stage (holds the embedding).
    bool rank_holds_first_stage(const JobSpec& job) const;

    bool placing() const { return detail_ == LayoutDetail::tensors; }

    const JobSpec* job_;
    LayoutDetail detail_;
    ChunkShape shape_;
    std::int64_t parameters_ = 0, expert_parameters_ = 0, linear_parameters_ = 0,
                 expert_linear_parameters_ = 0;
    std::int64_t fp8_parameters_ = 0;
    std::int64_t repeat_ = 1; // counts only: identical experts added once, counted this often
    std::vector<TensorLayout> tensors_;
    std::vector<ShardUnit> units_;
    std::vector<std::size_t> unit_ends_; // tensors_.size() as each unit closed
    std::map<std::tuple<TensorRole, std::int64_t, std::int64_t>, std::int64_t> index_;
};

} // namespace trident::core
