#pragma once
// One model chunk of a decoder-only GPT on one rank: the layers of a virtual stage, plus the
// vocabulary-parallel embedding on the first and the final norm, LM head and vocabulary-
// parallel cross-entropy on the last. Tensor parallelism as Shoeybi et al. 2019: QKV and the
// first MLP GEMM column-parallel, the output projection and second MLP GEMM row-parallel,
// an all-reduce after each row-parallel GEMM (forward) and each column-parallel input gradient
// (backward). The backward is split into B (input gradients, norm and bias-free parts) and
// W (weight gradients of the linear layers and the embedding), as zero-bubble schedules need;
// the other schedules run both at once (backward()), each weight gradient right after its
// input gradient, freeing each layer as it goes.
// Recomputation as the plan says (Korthikanti et al. 2022): a fully recomputed layer keeps only
// its input and runs its forward again inside B, just before its own backward; selective
// recomputation drops the attention core's saved state (the probabilities, or flash
// attention's log-sum-exp) and runs the core again from the saved QKV. Attention is flash
// attention (tiled, online softmax: Dao 2023) when the plan says flash_attention, else the
// unfused path that stores the s² probabilities. Sequence parallelism (Korthikanti et al.
// 2022): outside the tensor-parallel regions — norms, residuals, the embedding sum — each
// tensor rank holds 1/tp of the rows; all-gather enters a region, reduce-scatter leaves it.
// Dropout (Srivastava et al. 2014; Megatron's hidden and attention dropout, p = 0.1) on the
// embedding output, the attention probabilities and the two residual branches, in training
// only, with masks keyed by (seed, layer, site, sample, position, column) — never by rank —
// so every layout and every recomputation drops the same elements (kernels/cpu dropout_rows).
// Rotary position embedding (Su et al. 2021) turns the queries and keys after the QKV GEMM, by
// each token's position in its sequence (its context rank's positions); B turns their
// gradients back before the GEMM's backward.
#include "trident/core/job.h"
#include "trident/core/model_layout.h"
#include "trident/executor/communicator.h"

#include <cmath>
#include <cstdint>
#include <deque>
#include <memory>
#include <new>
#include <string>
#include <utility>
#include <vector>

namespace trident::executor {

class Fp8Numerics;

// Leaves new elements uninitialised when a vector grows: nearly every buffer here is written
// whole by the next kernel, and zero-filling them cost a fifth of a small model's step.
// Accumulators are zeroed explicitly (assign(n, 0.0f)).
template <typename T>
struct UninitializedAllocator : std::allocator<T> {
    template <typename U>
    struct rebind {
        using other = UninitializedAllocator<U>;
    };
    UninitializedAllocator() = default;
    template <typename U>
    UninitializedAllocator(const UninitializedAllocator<U>&) noexcept {}
    template <typename U>
    void construct(U* p) noexcept {
        ::new (static_cast<void*>(p)) U;
    }
    template <typename U, typename... Args>
    void construct(U* p, Args&&... args) {
        ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
    }
};

using Vec = std::vector<float, UninitializedAllocator<float>>;

// Frees a buffer's memory (clear() would keep its capacity).
inline void release(Vec& v) {
    Vec().swap(v);
}

// All parameters of one rank in one flat buffer (and one for their gradients), so data
// parallelism and the sharded optimizer see a single array.
struct ParameterStore {
    struct Tensor : core::TensorFlags {
        std::string name;
        std::int64_t offset = 0, size = 0;
        // Where this shard sits in the full tensor: (full offset, length) of each contiguous
        // run, in shard order; one run covering everything when the tensor is not split.
        std::int64_t full_size = 0;
        std::vector<std::pair<std::int64_t, std::int64_t>> placement;
    };
    Vec values, grads;
    std::vector<Tensor> tensors;
    std::int64_t add(std::string name, std::int64_t size, core::TensorFlags flags);
};

// Adds the tensors of `layout` to `store`, in the layout's order, and initialises them: every
// tensor generated at full size from (seed, its init name) and this rank's runs kept, so any
// layout starts from the same model; norms' weights 1, biases 0. Returns their offsets.
std::vector<std::int64_t> allocate_tensors(const core::ChunkLayout& layout, ParameterStore& store,
                                           std::uint64_t seed);

// ZeRO-3 (parameters sharded over the data ranks): a chunk acquires a unit's parameters before
// it reads them and releases them when its pass is done with them; the trainer all-gathers and
// drops them (fsdp_units.h). Units are the layout table's FSDP units
// (core::ChunkLayout::units: the embedding, each layer, the final norm with the head), numbered
// per chunk in forward order. Collective over the data ranks, which walk the same schedule.
// Prefetch (FSDP's): holding a pass's step also begins the gathers of the units of its next
// prefetch_depth() steps, which acquire then completes.
class ParameterUnits {
public:
    virtual ~ParameterUnits() = default;
    virtual void acquire(std::int32_t chunk, std::int32_t unit) = 0;
    virtual void prefetch(std::int32_t chunk, std::int32_t unit) = 0;
    virtual void release(std::int32_t chunk, std::int32_t unit) = 0;
    virtual std::int64_t prefetch_depth() const = 0;
};

// The groups a chunk talks over.
struct ChunkComms {
    Communicator& tensor;
    Communicator& expert;
    Communicator& context;
    Communicator& expert_tensor;     // the ranks splitting each expert's columns (etp)
    Communicator& tensor_expert;     // etp·ep ranks: the allgather dispatcher's group
    ParameterUnits* units = nullptr; // ZeRO-3's gathers; null: every parameter is present
};

// Positions of the tokens a context-parallel rank holds, per sequence (Megatron's causal load
// balancing: of 2·cp equal chunks, rank r takes chunk r and chunk 2·cp − 1 − r).
std::vector<std::int32_t> context_positions(std::int64_t seq, std::int64_t cp, std::int64_t rank);

class GptChunk {
public:
    // Adds this chunk's tensors to `store` and initialises them: every tensor is generated at
    // full size from (seed, name) and this tensor rank's shard kept, so any layout starts
    // from the same model.
    // `etp_rank`: the rank's expert-tensor index (RankCoord::etp; -1: tp_rank mod etp).
    GptChunk(const core::JobSpec& job, std::int32_t pipeline_rank, std::int32_t chunk, int tp_rank,
             int ep_rank, int cp_rank, ParameterStore& store, std::uint64_t seed,
             int etp_rank = -1);

    bool first() const { return first_; }
    bool last() const { return last_; }
    // The positions in each sequence of this context rank's tokens (all of them when cp is 1).
    const std::vector<std::int32_t>& local_positions() const {
        return positions_[std::size_t(cp_rank_)];
    }
    // One micro-batch's hidden state on this rank: [N×h], or its 1/tp rows under sequence
    // parallelism (what travels between pipeline stages).
    std::int64_t hidden_elements() const { return shape_.rows * shape_.hidden; }
    // This chunk's tensors in the store: the first one's index, and each one's FSDP unit.
    std::size_t first_tensor() const { return first_tensor_; }
    const std::vector<std::int32_t>& tensor_units() const { return tensor_units_; }
    std::int32_t layer_count() const { return std::int32_t(layers_.size()); }
    std::int64_t local_experts() const { return shape_.local_experts; }
    std::int64_t first_layer() const { return shape_.first_layer; } // global index
    // Routed slots per expert (all experts, global ids) summed over this chunk's MoE layers and
    // its training forwards so far (recomputation and evaluation not counted); under sequence
    // parallelism already summed over the tensor group, so every tensor rank holds the same.
    const std::vector<double>& routed_slots() const { return routed_slots_; }
    // Per pass (one MoE layer's training forward of one micro-batch), the slots this rank's
    // own rows route to each expert, before any capacity drop; the most recent kRoutedPasses.
    static constexpr std::size_t kRoutedPasses = 4096;
    const std::deque<std::vector<double>>& routed_passes() const { return routed_passes_; }
    // Multi-token prediction on a last chunk whose rank holds the first stage in its other
    // chunk (V-shaped schedules, DualPipe) with untied embeddings: the next tokens are looked
    // up in that chunk's word embedding (`first`), as DeepSeek-V3 shares it (§3.2.3).
    bool needs_mtp_table() const { return !mtp_.empty() && mtp_table_ < 0; }
    void share_mtp_table(const GptChunk& first);
    // FP8 training: the linear layers' GEMMs of the FP8 layers read their operands through
    // `fp8` (fp8_numerics.h); null: full precision.
    void use_fp8(Fp8Numerics* fp8) { fp8_ = fp8; }

    // Saved activations of one layer, and what B leaves for W: the output gradients of the
    // four linear layers.
    // Routing state of an MoE layer for one micro-batch (Shazeer et al. 2017; Fedus et al.
    // 2021): top-k of the router's softmax, gates renormalised over the k (Mixtral), tokens sent
    // to the experts' ranks by a variable-size all-to-all over the expert group (or gathered
    // over the etp·ep group by the allgather dispatcher), and everything the backward and W
    // need.
    struct MoeState {
        Vec probs;                                     // [N×E] router softmax
        std::vector<std::int32_t> topk;                // [N×k] chosen experts
        Vec gates;                                     // [N×k]
        Vec load;                                      // [E] share of routed slots per expert (f_e)
        std::vector<std::int32_t> slot_rank, slot_row; // where each slot's token went (-1: dropped)
        std::vector<std::int64_t> sent, received;      // rows to / from each expert rank
        std::vector<std::int32_t> recv_expert, recv_pos; // received row → local expert, row
        std::vector<std::int64_t> etp_rows; // rows each expert-tensor rank received, in order
        // allgather dispatcher: rows each rank of the etp·ep group gathered, and each expert
        // row's slot among them (gathered token · k + choice).
        std::vector<std::int64_t> gathered_rows, local_slots;
        // flex dispatcher: each slot's pair in its token's row to that rank (-1: dropped), and
        // per expert row the received token row it fans out from and its pair there.
        std::vector<std::int32_t> slot_pair, row_pair;
        std::vector<std::int64_t> row_token;
        std::vector<Vec> gate;        // per local expert: each row's routing weight
        std::vector<Vec> x, fc, act;  // per local expert: inputs, fc1 out, activation out
        std::vector<Vec> d_fc, d_out; // per local expert, for W: fc1 and fc2 output grads
        Vec d_logits;                 // [N×E] for the router's W
        Vec lse;                      // [N] log-sum-exp of the router logits (z-loss)
        double router_loss = 0.0;     // the load-balancing and z-losses' value
    };
    // Multi-head latent attention's saved state for B and W (gpt_chunk_mla.cpp).
    struct MlaState {
        Vec q_c, q_in, q_mean, q_rstd;   // q latent, its norm's output (q_up's input) and stats
        Vec kv_c, c_n, c_mean, c_rstd;   // kv_down's output, the latent's norm output and stats
        Vec att_v;                       // the attention output without value padding
        Vec d_q, d_q_c, d_kv_up, d_kv_c; // output gradients W needs
    };
    struct Layer {
        Vec x_in, ln1, ln1_mean, ln1_rstd, qkv, att, x_mid, ln2, ln2_mean, ln2_rstd, fc, act;
        Vec probs; // unfused attention: the softmax [B×H×T×T]
        Vec lse;   // flash attention: log-sum-exp per query row [B×H×T]
        Vec kv;    // context parallelism: the whole sequence's keys and values [B×seq×2·KV·D]
        std::vector<std::uint64_t> attention_keys; // dropout: one per (sequence, head, query)
        Vec d_qkv, d_proj_out, d_fc, d_fc2_out;
        // An MoE layer with shared experts under sequence parallelism: this rank's rows of
        // norm2's output, which it routes (ln2 then holds all rows, for the shared experts).
        Vec moe_in;
        MoeState moe;
        MlaState mla;
    };
    struct Activations {
        const std::int32_t* tokens = nullptr;
        const std::int32_t* targets = nullptr;
        std::int64_t first_sample = 0; // global index of the micro-batch's first sequence
        bool training = true;          // false: evaluation, no dropout
        Vec input;                     // [N×h] hidden input (not the first chunk)
        Vec output;                    // [N×h] hidden output (not the last chunk)
        std::vector<Layer> layers;
        Vec embedding_grad; // first chunk: d(embedding output)
        Vec lnf, lnf_mean, lnf_rstd, logits, row_max, sum_exp, dlogits; // last chunk
        Vec hidden_out;    // last chunk: final layer output
        double loss = 0.0; // last chunk: mean over tokens
        // MoE layers: the load-balancing and z-losses' value, summed over this chunk's layers.
        // Not in `loss` (which Megatron reports as the language-model loss alone); the
        // gradients include them.
        double router_loss = 0.0;
        // Multi-token prediction (last chunk; gpt_chunk_mtp.cpp): per depth its inputs, state
        // and loss; mtp_loss is their weighted sum (λ/D · Σ), in the gradient, not in `loss`.
        struct Mtp {
            std::vector<std::int32_t> tokens, targets; // rolled: position t reads t + depth + 1
            std::vector<std::uint8_t> counted;         // whether t's label is in the sequence
            std::int64_t labels = 0;                   // how many are, over the micro-batch
            Vec emb, e_mean, e_rstd, h_prev, h_mean, h_rstd, cat;       // prelude (cat: all rows)
            Vec out, lnf_mean, lnf_rstd, lnf, logits, row_max, sum_exp; // layer output, head
            double loss = 0.0; // mean cross-entropy over the counted labels
        };
        std::vector<Mtp> mtp;
        double mtp_loss = 0.0;
        Vec dinput;                     // B's result (not the first chunk)
        double weight_gradient_s = 0.0; // a fused backward: the seconds its weight gradients took
        double peak_bytes = 0.0;        // the most bytes() reached inside the last backward
        // Everything above and in the layers, MoE routing state included, in bytes.
        double bytes() const;
    };

    // The last chunk's loss is this rank's share of the micro-batch's mean (its tokens' sum
    // over all the micro-batch's tokens: the context ranks' shares add up to the mean).
    void forward(Activations& a, const ChunkComms& comms) const;
    // `dout` is the gradient of the chunk output (ignored by the last chunk, whose loss is
    // scaled by `loss_scale`, the micro-batch's share of the step's mean loss).
    // B alone: input gradients; `a` keeps what backward_weight needs (zero-bubble schedules).
    void backward_input(Activations& a, const float* dout, float loss_scale,
                        const ChunkComms& comms) const;
    void backward_weight(Activations& a) const;
    // B and W fused (the other schedules): the same gradients, bit for bit, holding at most the
    // layers not yet reached and one in progress; a.weight_gradient_s says how long W took.
    void backward(Activations& a, const float* dout, float loss_scale,
                  const ChunkComms& comms) const;

private:
    struct ExpertParams {
        std::int64_t fc_w, fc_b, fc2_w, fc2_b;
    };
    struct LayerParams {
        std::int32_t unit = 0; // its FSDP unit in this chunk
        std::int64_t ln1_w, ln1_b, qkv_w, qkv_b, proj_w, proj_b, ln2_w, ln2_b, fc_w, fc_b, fc2_w,
            fc2_b;
        // The dense MLP (fc_*) is the layer's MLP, or an MoE layer's shared experts as one MLP
        // (DeepSeekMoE; Megatron-Core's SharedExpertMLP) beside the routed ones.
        std::int64_t mlp_width = 0; // this rank's columns of fc1 (per half under SwiGLU); 0: none
        bool moe = false;
        std::int32_t index = 0; // in this chunk
        bool fp8 = false;       // its linear layers run in FP8
        std::int64_t router_w = -1;
        // MLA (qkv_w unused): the projections and the latents' norms.
        std::int64_t q_down = -1, q_norm_w = -1, q_norm_b = -1, q_up = -1, kv_down = -1,
                     kv_norm_w = -1, kv_norm_b = -1, kv_up = -1;
        std::vector<ExpertParams> experts; // this rank's experts
    };
    enum class Linear {
        qkv,
        proj,
        fc1,
        fc2,
        mla_q_down,
        mla_q_up,
        mla_kv_down,
        mla_kv_up,
        mtp_eh_proj // an MTP module's 2h → h projection (on its layer's LayerParams)
    };
    // The norms' outputs (L.ln1 from x_in; L.ln2 — and moe_in — from x_mid) and the dense MLP's
    // hidden state (L.fc, L.act from L.ln2); the selective recomputation by module that drops
    // and rebuilds them (gpt_chunk_recompute.cpp).
    Vec normed_rows(const Vec& in, Vec& mean, Vec& rstd, std::int64_t w, std::int64_t b) const;
    void norm1(const LayerParams& lp, Layer& L, Communicator& tp) const;
    void norm2(const LayerParams& lp, Layer& L, Communicator& tp) const;
    void mlp_hidden(const LayerParams& lp, Layer& L) const;
    bool recomputes_mlp(const LayerParams& lp) const;
    void drop_recomputed(const LayerParams& lp, Layer& L) const;
    void rebuild_recomputed(const LayerParams& lp, Layer& L, const ChunkComms& comms) const;
    // The dense MLP on L.ln2: the output rows (reduced over the tensor group, bias added).
    Vec mlp_forward(const LayerParams& lp, Layer& L, Communicator& tp) const;
    // Its B from the gradient of its output rows: the gradient of L.ln2's rows; fused, each
    // weight gradient right after its input gradient.
    Vec mlp_backward(const LayerParams& lp, Layer& L, Vec dy, Activations& a, Communicator& tp,
                     bool fused) const;
    // MLA (gpt_chunk_mla.cpp): L.qkv packed from L.ln1 as the attention kernels read it; B
    // from L.d_qkv into d_ln1 (+=); the projections' weight gradients; the attention output
    // without its value padding (the output projection's input) and the padding put back.
    void mla_forward(const LayerParams& lp, Layer& L) const;
    // Its up-projections from the saved latents (and L.ln1 without a q latent): L.qkv, what
    // the mla_up_proj recomputation drops and rebuilds.
    void mla_up(const LayerParams& lp, Layer& L) const;
    // The q and kv latents' norms (their outputs feed the up-projections): in the forward, and
    // again in B when the layernorm recomputation dropped them.
    void mla_latent_norms(const LayerParams& lp, Layer& L) const;
    void mla_backward(const LayerParams& lp, Layer& L, Vec& d_ln1) const;
    void mla_weight_gradients(const LayerParams& lp, Layer& L, bool release_inputs) const;
    void compact_values(Layer& L) const;
    Vec padded_values(const Vec& compact) const;
    void latent_norm_forward(const float* in, float* out, Vec& mean, Vec& rstd, std::int64_t w,
                             std::int64_t b, std::int64_t width) const;
    void latent_norm_backward(float* din, const float* dout, const float* in, const Vec& mean,
                              const Vec& rstd, std::int64_t w, std::int64_t b,
                              std::int64_t width) const;
    // The output projection's input: the attention output, MLA's without value padding.
    Vec& projection_input(Layer& L) const { return is_mla_ ? L.mla.att_v : L.att; }
    // The rows the router sees: this rank's (ln2, or moe_in when ln2 holds all rows).
    const Vec& routed_input(const Layer& L) const { return L.moe_in.empty() ? L.ln2 : L.moe_in; }
    // MoE forward in steps (gpt_chunk_moe.cpp): the router and its losses; the dispatch (rows
    // received, each followed by its local expert and routing weight); the experts (each row's
    // weighted output); the combine into y.
    void moe_route(const LayerParams& lp, Layer& L, Communicator& tp) const;
    void count_routed_slots(const MoeState& s) const;
    Vec moe_dispatch(Layer& L, const ChunkComms& comms) const;
    // With a capacity factor each expert takes at most ⌈cf · N·k / E⌉ of the slots a rank with
    // N rows routes, in token order; the rest are dropped (their output is zero, as in GShard
    // and Switch), and with pad_to_capacity_ zero rows of routing weight 0 make each expert's
    // up to exactly that many (Megatron pads with tokens of probability 0: the same numbers).
    // Dropless: every slot.
    std::int64_t expert_capacity(std::int64_t rows) const {
        return capacity_factor_ > 0
                   ? std::int64_t(
                         std::ceil(capacity_factor_ * double(rows * top_k_) / double(experts_)))
                   : rows * top_k_;
    }
    Vec moe_experts_forward(const LayerParams& lp, MoeState& s, const Vec& rows) const;
    void moe_combine(Layer& L, Vec out, Vec& y, const ChunkComms& comms) const;
    // And backward: each expert row's output gradient; the experts' backward (per row the input
    // gradient and the routing weight's, h + 1 wide); their return to the tokens.
    Vec moe_send_gradients(Layer& L, const Vec& dy, const ChunkComms& comms) const;
    Vec moe_experts_backward(const LayerParams& lp, MoeState& s, const Vec& at_experts) const;
    void moe_return_gradients(Layer& L, Vec ret, Vec& d_in, Vec& d_gate,
                              const ChunkComms& comms) const;
    // The allgather dispatcher's versions of the three exchanges (gpt_chunk_moe_gather.cpp).
    Vec moe_gather_dispatch(Layer& L, const ChunkComms& comms) const;
    void moe_gather_combine(Layer& L, const Vec& out, Vec& y, const ChunkComms& comms) const;
    Vec moe_gather_gradients(Layer& L, const Vec& dy, const ChunkComms& comms) const;
    void moe_gather_return(Layer& L, const Vec& ret, Vec& d_in, Vec& d_gate,
                           const ChunkComms& comms) const;
    // The flex dispatcher's (gpt_chunk_moe_flex.cpp): a token once per destination rank.
    Vec moe_flex_dispatch(Layer& L, const ChunkComms& comms) const;
    void moe_flex_combine(Layer& L, Vec out, Vec& y, const ChunkComms& comms) const;
    Vec moe_flex_gradients(Layer& L, const Vec& dy, const ChunkComms& comms) const;
    void moe_flex_return(Layer& L, Vec ret, Vec& d_in, Vec& d_gate, const ChunkComms& comms) const;
    // Local expert e's activation scaled row by row by its routing weights (fc2's input).
    Vec weighted_activation(const MoeState& s, std::int64_t e) const;
    void moe_forward(const LayerParams& lp, Layer& L, Vec& y, const ChunkComms& comms) const;
    // B: d_in (this rank's rows of norm2's output) += the routed experts' and the router's.
    void moe_backward(const LayerParams& lp, Layer& L, const Vec& dy, Vec& d_in, float loss_scale,
                      const ChunkComms& comms) const;
    void moe_router_backward(const LayerParams& lp, Layer& L, const Vec& d_gate, Vec& d_in,
                             float loss_scale) const;
    // Entering a tensor-parallel region: this rank's rows → all rows (all-gather under
    // sequence parallelism, a copy otherwise).
    Vec gather_rows(Vec local, Communicator& tp) const; // moves `local` through when not split
    // Leaving it: every rank's partial sums over all rows → the sum over this rank's rows
    // (reduce-scatter under sequence parallelism, all-reduce otherwise).
    Vec reduce_rows(Vec partial, Communicator& tp) const;
    // One layer's forward from x (replaced by the layer's output), saving into L.
    void layer_forward(std::size_t i, Layer& L, Vec& x, const ChunkComms& comms,
                       const Activations& a) const;
    // B of the whole chunk, with W fused in or not.
    void backward_pass(Activations& a, const float* dout, float loss_scale, const ChunkComms& comms,
                       bool fused) const;
    // B of layer i: dx (the gradient of its output) becomes the gradient of its input; fused,
    // each linear layer's weight gradient follows its input gradient and frees its inputs.
    void layer_backward(std::size_t i, Activations& a, Vec& dx, float loss_scale,
                        const ChunkComms& comms, bool fused) const;
    // W pieces, each from the input its forward saved and the output gradient B left; with
    // `release_inputs` both are freed.
    void linear_weight_gradient(const LayerParams& lp, Layer& L, Linear which,
                                bool release_inputs) const;
    void moe_weight_gradients(const LayerParams& lp, Layer& L, bool release_inputs) const;
    void head_weight_gradient(Activations& a, bool release_inputs) const;
    void embedding_weight_gradient(Activations& a, bool release_inputs) const;
    // Dropout sites, mixed into the mask keys.
    enum DropoutSite : std::uint64_t { embedding_out = 1, attention_probs, attention_out, mlp_out };
    // The gradient of a branch behind dropout site `site` of `layer` (−1: the embedding).
    Vec branch_gradient(const Vec& dx, DropoutSite site, std::int64_t layer,
                        const Activations& a) const;
    bool dropping(const Activations& a) const { return dropout_ && a.training; }
    // This rank's rows of `x` ([Nl×h]) through dropout at `site` of layer `layer`.
    void drop_rows(Vec& x, DropoutSite site, std::int64_t layer, const Activations& a) const;
    std::vector<std::uint64_t> attention_dropout_keys(std::int64_t layer,
                                                      const Activations& a) const;
    // Attention of this rank's queries: over its own sequence, or — with context parallelism —
    // over the whole sequence's keys and values, all-gathered (Megatron-Core's all-gather
    // variant; the backward reduce-scatters their gradients back to their owners). Flash or
    // unfused as the plan says (gpt_chunk_attention.cpp).
    void attention_forward(Layer& L, Communicator& cp) const;
    void attention_backward(Layer& L, const Vec& d_att, Communicator& cp) const;
    // The units' parameters present (ZeRO-3) until drop_units.
    void hold_units(const ChunkComms& comms, const std::vector<std::int32_t>& units) const;
    void drop_units(const ChunkComms& comms, const std::vector<std::int32_t>& units) const;
    std::vector<std::int32_t> layer_unit(std::size_t i) const { return {layers_[i].unit}; }
    // A pass's steps in the order it reads their units — forward: the embedding, the layers,
    // the head; backward: the head, the layers from the last — and the units of step `step`
    // (none past the end). hold_step holds them and prefetches the next steps' (ZeRO-3).
    enum class PassOrder { forward, backward };
    std::vector<std::int32_t> step_units(PassOrder order, std::size_t step) const;
    void hold_step(const ChunkComms& comms, PassOrder order, std::size_t step) const;
    void drop_step(const ChunkComms& comms, PassOrder order, std::size_t step) const;
    // The step of layer i in each order.
    std::size_t forward_step(std::size_t i) const { return (first_ ? 1 : 0) + i; }
    std::size_t backward_step(std::size_t i) const {
        return (last_ ? 1 : 0) + (main_layers_ - 1 - i);
    }
    // After a layer's forward: its router loss and routing counted, and what its
    // recomputation drops dropped.
    void settle_layer(std::size_t i, Layer& L, Activations& a) const;
    void add_mtp_modules(const core::JobSpec& job, const core::ChunkLayout& layout,
                         const std::vector<std::int64_t>& offsets);
    LayerParams layer_params(const core::JobSpec& job, const core::ChunkLayout& layout,
                             const std::vector<std::int64_t>& offsets, std::int64_t layer) const;
    // Multi-token prediction (DeepSeek-V3 §2.2; Megatron-Core's MultiTokenPredictionBlock):
    // module d embeds the tokens d + 1 ahead, normalises them and the previous depth's hidden
    // state, projects the pair 2h → h (column-parallel, gathered), runs its transformer layer
    // (layers_[main_layers_ + d]) and its final norm, and the shared head scores the token
    // d + 2 ahead. Forward after the main loss; B before the main head's, returning the
    // gradient of the main final norm's output rows.
    struct MtpParams {
        std::int64_t enorm_w, enorm_b, hnorm_w, hnorm_b, eh_proj, lnf_w, lnf_b;
        std::vector<std::int32_t> units; // its own, the head's and the table's
    };
    void mtp_forward(Activations& a, const ChunkComms& comms) const;
    void hold_mtp_units(const ChunkComms& comms, std::size_t d) const;
    void drop_mtp_units(const ChunkComms& comms, std::size_t d) const;
    Vec mtp_backward(Activations& a, float loss_scale, const ChunkComms& comms, bool fused) const;
    void mtp_prelude(std::size_t d, Activations& a, Vec& x, Communicator& tp) const;
    Vec mtp_prelude_backward(std::size_t d, Activations& a, const Vec& dx, Communicator& tp) const;
    // The vocabulary-parallel lookup of `tokens` in `table`, summed over the tensor group (this
    // rank's rows under sequence parallelism).
    Vec embed(const std::int32_t* tokens, std::int64_t table, Communicator& tp) const;
    // The head over `lnf` (all rows): logits → exponentials in place, the row maxima and sums
    // (reduced over the tensor group); returns the cross-entropy summed over the rows `counted`
    // marks (every row when null).
    double head_loss(const Vec& lnf, Vec& logits, Vec& row_max, Vec& sum_exp,
                     const std::int32_t* targets, const std::uint8_t* counted,
                     Communicator& tp) const;
    // A linear layer's GEMMs (matmul_forward, _backward_input, _backward_weight), through FP8
    // numerics when the layer runs in FP8 (gpt_chunk_fp8.cpp); `expert`: a local routed
    // expert's (fc1, fc2), -1 otherwise.
    void gemm_forward(const LayerParams& lp, Linear which, std::int32_t expert, float* out,
                      const float* in, const float* w, const float* b, std::int64_t N,
                      std::int64_t C, std::int64_t OC) const;
    void gemm_input_gradient(const LayerParams& lp, Linear which, std::int32_t expert, float* din,
                             const float* dout, const float* w, std::int64_t N, std::int64_t C,
                             std::int64_t OC) const;
    void gemm_weight_gradient(const LayerParams& lp, Linear which, std::int32_t expert, float* dw,
                              float* db, const float* dout, const float* in, std::int64_t N,
                              std::int64_t C, std::int64_t OC) const;
    float* p(std::int64_t offset) const { return store_->values.data() + offset; }
    float* g(std::int64_t offset) const { return store_->grads.data() + offset; }
    void norm_forward(const float* in, float* out, float* mean, float* rstd, std::int64_t w,
                      std::int64_t b) const;
    void norm_backward(float* dinp, const float* dout, const float* in, const float* mean,
                       const float* rstd, std::int64_t w, std::int64_t b) const;

    const core::ModelSpec* model_;
    ParameterStore* store_;
    bool first_, last_, layernorm_, swiglu_, bias_, sp_;
    bool flash_ = true; // the plan's flash_attention
    std::int64_t cp_ = 1, seq_ = 0, loss_tokens_ = 0;
    std::vector<std::vector<std::int32_t>> positions_; // per context rank
    std::vector<std::int32_t> visible_;                // keys each local query sees
    std::vector<std::int32_t> row_positions_; // sequence position of each of the N rows (RoPE)
    bool rope_ = false;
    double rotary_base_ = 10000.0;
    float norm_eps_ = 1e-5f; // the model's norm_epsilon
    bool dropout_ = false;
    std::uint64_t seed_ = 0;
    int tp_rank_ = 0;
    int cp_rank_ = 0;
    core::ChunkShape shape_; // this rank's sizes: tokens, rows, local heads, vocabulary, …
    std::int64_t wte_ = -1, wpe_ = -1, lnf_w_ = -1, lnf_b_ = -1, head_ = -1;
    std::int64_t experts_ = 0, top_k_ = 0;
    std::int64_t router_groups_ = 0, group_topk_ = 0; // group-limited routing (0: none)
    bool is_mla_ = false;
    core::MlaSpec mla_;
    std::int64_t proj_in_ = 0; // the output projection's input width on this rank
    double aux_coeff_ = 0.0, z_coeff_ = 0.0;
    double capacity_factor_ = 0.0; // 0: dropless
    bool pad_to_capacity_ = false; // every expert's rows made up to its capacity
    core::TokenDispatcher dispatcher_ = core::TokenDispatcher::alltoall;
    std::vector<LayerParams> layers_; // the chunk's, then (last chunk) the MTP modules'
    std::size_t main_layers_ = 0;
    std::vector<MtpParams> mtp_;
    std::int64_t mtp_table_ = -1;       // the word embedding MTP looks the next tokens up in
    std::int32_t mtp_table_chunk_ = -1; // the chunk whose embedding unit holds it (-1: this)
    double mtp_scale_ = 0.0; // λ / D (Megatron's mtp_loss_scaling_factor / mtp_num_layers)
    std::vector<core::RecomputeGranularity> recompute_; // per layer of this chunk
    std::int32_t chunk_ = 0;                            // this rank's chunk index
    Fp8Numerics* fp8_ = nullptr;
    std::size_t first_tensor_ = 0;           // in the store
    std::vector<std::int32_t> tensor_units_; // per tensor of this chunk
    // The units the embedding and the head read (the head: its own, and the embedding's when
    // it is the tied table itself).
    std::vector<std::int32_t> embedding_units_, head_units_;
    core::Recompute recompute_plan_; // which modules selective rebuilds
    // A statistic of the run (routed_slots()), not model state: counted from const forwards.
    mutable std::vector<double> routed_slots_;
    mutable std::deque<std::vector<double>> routed_passes_;
};

} // namespace trident::executor
