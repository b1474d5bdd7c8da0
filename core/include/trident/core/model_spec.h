#pragma once
// ModelSpec: a decoder-only transformer as Megatron-LM describes one (GPT, Llama, Mixtral,
// DeepSeek-V3). Field names follow Megatron's command line in snake_case.
#include "trident/core/dtype.h"
#include "trident/core/json_io.h"

#include <array>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace trident::core {

enum class Activation { gelu, swiglu };
enum class Normalization { layernorm, rmsnorm };
enum class PositionEmbedding { learned, rope };

std::string to_string(Activation a);
std::string to_string(Normalization n);
std::string to_string(PositionEmbedding p);

// Mixture of experts (Shazeer et al. 2017; GShard; Switch; DeepSeekMoE shared experts).
// How evenly the router spreads tokens over the experts (what sets the slowest expert-parallel
// rank): `forced` — every expert equal, as Megatron's benchmarks force it; `aux_loss` — trained
// with an auxiliary balancing loss, the hottest expert at 1 + kAuxLossMaxViolation times the
// mean; `histogram` — measured tokens per expert.
enum class LoadBalance { forced, aux_loss, histogram };
inline constexpr std::array<std::string_view, 3> kLoadBalanceNames = {"forced", "aux-loss",
                                                                      "histogram"};
// Wang et al. 2024, "Auxiliary-Loss-Free Load Balancing Strategy for Mixture-of-Experts"
// (arXiv:2408.15664), Table 2: the auxiliary-loss baseline's global MaxVio (max load over the
// mean, minus 1) at 3B parameters (DeepSeekMoE, 64 routed experts, top-6) is 0.52.
inline constexpr double kAuxLossMaxViolation = 0.52;

struct MoeSpec {
    std::int64_t num_experts = 0; // routed experts per MoE layer
    std::int64_t top_k = 0;       // experts each token is routed to
    std::int64_t expert_ffn_hidden_size = 0;
    std::int64_t shared_expert_ffn_hidden_size = 0; // 0: no shared expert (total width)
    std::int64_t layer_frequency = 1;      // every n-th layer (after the dense ones) is MoE
    std::int64_t first_dense_layers = 0;   // leading layers that keep a dense MLP
    std::optional<double> capacity_factor; // nullopt: dropless
    // Every expert's input padded to exactly its capacity (Megatron's
    // --moe-pad-expert-input-to-capacity; needs a capacity factor): fixed shapes, paid for in
    // compute, all-to-all bytes and activations.
    bool pad_to_capacity = false;
    double aux_loss_coeff = 0.01; // load-balancing loss weight (Switch Transformer)
    double z_loss_coeff = 0.0;    // router z-loss weight (ST-MoE; Megatron --moe-z-loss-coeff)
    LoadBalance load_balance = LoadBalance::forced;
    std::vector<double> tokens_per_expert; // the histogram (load_balance histogram)
    // Optionally the histogram of each pass — one MoE layer's forward of one micro-batch over
    // an expert-parallel group, as `trident run --moe-routing-out` records them: the busiest
    // rank is then the mean over passes of each pass's busiest, as a step pays it (each pass's
    // all-to-all waits for its own busiest rank; a histogram summed over the run evens out).
    std::vector<std::vector<double>> tokens_per_expert_passes;
    // Derived from the passes when read (read_load_balance), not saved: the uncapped busiest
    // load for each ep dividing num_experts, so a search does not walk every pass per layout.
    std::vector<std::pair<std::int64_t, double>> busiest_by_ep;
    // Group-limited routing (DeepSeek-V2 §2.1.3 device-limited, DeepSeek-V3 §2.1.2 node-limited;
    // Megatron --moe-router-num-groups / --moe-router-group-topk): the experts form
    // router_num_groups contiguous groups and a token takes its top-k from the best
    // router_group_topk of them. 0: unlimited.
    std::int64_t router_num_groups = 0;
    std::int64_t router_group_topk = 0;
    // Routed tokens of the busiest of `ep` expert-parallel ranks over the mean rank's (>= 1);
    // experts sit on ranks in contiguous blocks of num_experts / ep, as in Megatron-Core. With
    // `expert_cap` each expert takes at most that many times the mean expert's tokens (the rest
    // dropped), so the result may fall under 1.
    double slowest_rank_load(std::int64_t ep,
                             double expert_cap = std::numeric_limits<double>::infinity()) const;
    // What the busiest expert-parallel rank's experts compute and receive, over the mean
    // dropless rank's: with a capacity factor padded to capacity, exactly the factor (every
    // expert takes that many copies whatever the routing); with a factor and no padding, the
    // routing's load with each expert capped at the factor (Megatron's
    // --moe-expert-capacity-factor: the rest dropped); dropless, the routing's imbalance.
    double expert_load(std::int64_t ep) const {
        if (!capacity_factor) return slowest_rank_load(ep);
        return pad_to_capacity ? *capacity_factor : slowest_rank_load(ep, *capacity_factor);
    }
    // Expected number of `holders` (ranks or nodes holding num_experts / holders contiguous
    // experts each) that receive at least one of a token's top-k experts, with routing limited
    // to router_group_topk groups when set: what a dispatcher that sends a token once per
    // holder (DeepEP) sends.
    double expected_destinations(std::int64_t holders) const;
};
// moe.load_balance: "forced", "aux-loss", {"tokens_per_expert": [...], "passes": [[...], ...]}
// ("passes" optional) or the path of a JSON file holding that object.
void read_load_balance(const Json& j, const std::string& path, MoeSpec& m);
Json load_balance_json(const MoeSpec& m);

// Multi-head latent attention (DeepSeek-V2 2024): low-rank Q and joint KV compression.
struct MlaSpec {
    std::int64_t q_lora_rank = 0; // 0: queries projected directly from the hidden state
    std::int64_t kv_lora_rank = 0;
    std::int64_t qk_head_dim = 0;         // per-head query/key width without rotary part
    std::int64_t qk_pos_emb_head_dim = 0; // per-head rotary part, shared by all heads for K
    std::int64_t v_head_dim = 0;
};

struct Precision {
    Dtype params = Dtype::bf16;          // weights used in forward/backward
    Dtype grads = Dtype::fp32;           // main gradients (Megatron accumulates in fp32)
    Dtype optimizer_state = Dtype::fp32; // Adam m and v
    bool master_weights = true;          // fp32 copy of the weights held by the optimizer
};

struct ModelSpec {
    std::string name;
    std::string source; // where the published values come from
    std::int64_t num_layers = 0;
    std::int64_t hidden_size = 0;
    std::int64_t num_attention_heads = 0;
    std::int64_t num_query_groups = 0; // KV heads (GQA); == heads for multi-head attention
    std::int64_t head_dim = 0;         // Megatron kv_channels; hidden / heads unless given
    std::int64_t ffn_hidden_size = 0;  // dense MLP width
    std::int64_t vocab_size = 0;       // unpadded
    std::int64_t max_position_embeddings = 0;
    Activation activation = Activation::gelu;
    Normalization normalization = Normalization::layernorm;
    PositionEmbedding position_embedding = PositionEmbedding::learned;
    double rotary_base = 10000.0; // RoPE's θ base (Megatron --rotary-base; Llama 3: 500000)
    double norm_epsilon = 1e-5;   // added to the variance in every norm (Megatron --norm-epsilon)
    std::int64_t make_vocab_size_divisible_by = 128; // Megatron --make-vocab-size-divisible-by
    bool tied_embeddings = true;
    bool linear_bias = true; // biases on the linear layers (GPT yes, Llama no)
    bool dropout = false;    // attention and hidden dropout (GPT trained with 0.1; Llama none)
    std::optional<MoeSpec> moe;
    std::optional<MlaSpec> mla;
    // Multi-token prediction (DeepSeek-V3 §2.2; Megatron-Core --mtp-num-layers): D sequential
    // modules after the last layer, the k-th predicting token i + k + 1 from the (k−1)-th's
    // hidden state and the embedding of token i + k: two norms, a 2h → h projection, one
    // transformer layer (MoE when the last layer is) and a final norm, sharing the embedding
    // and the output head; their losses are averaged and weighted by mtp_loss_scaling_factor.
    std::int64_t mtp_num_layers = 0;
    double mtp_loss_scaling_factor = 0.1;
    Precision precision;

    // Layers 0 … num_layers − 1 are the decoder's; num_layers + d is MTP module d's layer,
    // an MoE layer when the decoder's last layer is (Megatron-Core's MTP block spec).
    bool is_moe_layer(std::int64_t layer) const;
    std::int64_t num_moe_layers() const;
    // Megatron pads the vocabulary to a multiple of make_vocab_size_divisible_by · tp so every
    // shard is equal (the one padding rule: simulator, planner and both executors use it).
    std::int64_t padded_vocab_size(std::int64_t tp) const;
};

ModelSpec model_from_json(const Json& j, const std::string& path = "model");
Json to_json(const ModelSpec& m);
// Rules that involve the model alone (heads divide hidden, top_k <= experts, ...).
void validate(const ModelSpec& m, const std::string& path = "model");

} // namespace trident::core
