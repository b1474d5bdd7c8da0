#include "trident/core/model_spec.h"

#include "limits.h"
#include "trident/core/spec_error.h"

#include <array>

namespace trident::core {
namespace {

constexpr std::array<std::string_view, 2> kActivationNames = {"gelu", "swiglu"};
constexpr std::array<std::string_view, 2> kNormalizationNames = {"layernorm", "rmsnorm"};
constexpr std::array<std::string_view, 2> kPositionNames = {"learned", "rope"};

template <typename Enum, std::size_t N>
Enum read_enum(ObjectReader& r, std::string_view key,
               const std::array<std::string_view, N>& names) {
    return static_cast<Enum>(enum_index(r.string(key), names, r.field(key)));
}

// moe.router_num_groups and moe.router_group_topk: both or neither, groups dividing the experts,
// the chosen groups holding at least top_k experts.
void read_router_groups(ObjectReader& r, MoeSpec& m) {
    m.router_num_groups = r.integer_or("router_num_groups", 0, 0, m.num_experts);
    m.router_group_topk = r.integer_or("router_group_topk", 0, 0, m.num_experts);
    const auto s = [](std::int64_t v) { return std::to_string(v); };
    if ((m.router_num_groups > 0) != (m.router_group_topk > 0))
        throw SpecError(
            r.field(m.router_num_groups > 0 ? "router_group_topk" : "router_num_groups"),
            "is needed beside " +
                std::string(m.router_num_groups > 0 ? "router_num_groups" : "router_group_topk"));
    if (m.router_num_groups == 0) return;
    if (m.num_experts % m.router_num_groups != 0)
        throw SpecError(r.field("router_num_groups"),
                        s(m.router_num_groups) + " must divide num_experts " + s(m.num_experts));
    if (m.router_group_topk > m.router_num_groups)
        throw SpecError(r.field("router_group_topk"), s(m.router_group_topk) +
                                                          " exceeds router_num_groups " +
                                                          s(m.router_num_groups));
    if (m.router_group_topk * (m.num_experts / m.router_num_groups) < m.top_k)
        throw SpecError(r.field("router_group_topk"), s(m.router_group_topk) + " groups of " +
                                                          s(m.num_experts / m.router_num_groups) +
                                                          " experts hold fewer than top_k " +
                                                          s(m.top_k));
}

MoeSpec moe_from_json(const Json& j, const std::string& path) {
    using namespace limits;
    ObjectReader r(j, path);
    MoeSpec m;
    m.num_experts = r.integer("num_experts", 1, kMaxExperts);
    m.top_k = r.integer("top_k", 1, kMaxExperts);
    m.expert_ffn_hidden_size = r.integer("expert_ffn_hidden_size", 1, kMaxFfn);
    m.shared_expert_ffn_hidden_size = r.integer_or("shared_expert_ffn_hidden_size", 0, 0, kMaxFfn);
    m.layer_frequency = r.integer_or("layer_frequency", 1, 1, kMaxLayers);
    m.first_dense_layers = r.integer_or("first_dense_layers", 0, 0, kMaxLayers);
    if (const Json* cf = r.get("capacity_factor"); cf && !cf->is_null()) {
        if (!cf->is_number())
            throw SpecError(r.field("capacity_factor"), "must be a number or null (dropless)");
        m.capacity_factor = r.number("capacity_factor", 1.0e-6, 1.0e6);
    }
    m.pad_to_capacity = r.boolean_or("pad_to_capacity", false);
    if (m.pad_to_capacity && !m.capacity_factor)
        throw SpecError(
            r.field("pad_to_capacity"),
            "true needs a capacity_factor (dropless experts have no capacity to pad to)");
    m.aux_loss_coeff = r.number_or("aux_loss_coeff", m.aux_loss_coeff, 0.0, 1.0e3);
    m.z_loss_coeff = r.number_or("z_loss_coeff", m.z_loss_coeff, 0.0, 1.0e3);
    if (const Json* lb = r.get("load_balance")) read_load_balance(*lb, r.field("load_balance"), m);
    read_router_groups(r, m);
    r.finish();
    return m;
}

MlaSpec mla_from_json(const Json& j, const std::string& path) {
    using namespace limits;
    ObjectReader r(j, path);
    MlaSpec m;
    m.q_lora_rank = r.integer_or("q_lora_rank", 0, 0, kMaxHidden);
    m.kv_lora_rank = r.integer("kv_lora_rank", 1, kMaxHidden);
    m.qk_head_dim = r.integer("qk_head_dim", 1, kMaxHidden);
    m.qk_pos_emb_head_dim = r.integer("qk_pos_emb_head_dim", 0, kMaxHidden);
    m.v_head_dim = r.integer("v_head_dim", 1, kMaxHidden);
    r.finish();
    return m;
}

Precision precision_from_json(const Json& j, const std::string& path) {
    ObjectReader r(j, path);
    Precision p;
    p.params = parse_dtype(r.string_or("params", "bf16"), r.field("params"));
    p.grads = parse_dtype(r.string_or("grads", "fp32"), r.field("grads"));
    p.optimizer_state =
        parse_dtype(r.string_or("optimizer_state", "fp32"), r.field("optimizer_state"));
    p.master_weights = r.boolean_or("master_weights", true);
    r.finish();
    return p;
}

} // namespace

std::string to_string(Activation a) {
    return std::string(kActivationNames[int(a)]);
}
std::string to_string(Normalization n) {
    return std::string(kNormalizationNames[int(n)]);
}
std::string to_string(PositionEmbedding p) {
    return std::string(kPositionNames[int(p)]);
}

bool ModelSpec::is_moe_layer(std::int64_t layer) const {
    if (layer >= num_layers && num_layers > 0) layer = num_layers - 1; // an MTP module's layer
    if (!moe || layer < moe->first_dense_layers) return false;
    return (layer - moe->first_dense_layers) % moe->layer_frequency == 0;
}

std::int64_t ModelSpec::num_moe_layers() const {
    if (!moe || num_layers <= moe->first_dense_layers) return 0;
    const std::int64_t eligible = num_layers - moe->first_dense_layers;
    return (eligible + moe->layer_frequency - 1) / moe->layer_frequency;
}

std::int64_t ModelSpec::padded_vocab_size(std::int64_t tp) const {
    const std::int64_t multiple = make_vocab_size_divisible_by * tp;
    return (vocab_size + multiple - 1) / multiple * multiple;
}

ModelSpec model_from_json(const Json& j, const std::string& path) {
    using namespace limits;
    ObjectReader r(j, path);
    if (r.has("format")) r.expect_format("trident.model/1");
    ModelSpec m;
    m.name = r.string_or("name", "");
    m.source = r.string_or("source", "");
    m.num_layers = r.integer("num_layers", 1, kMaxLayers);
    m.hidden_size = r.integer("hidden_size", 1, kMaxHidden);
    m.num_attention_heads = r.integer("num_attention_heads", 1, kMaxHeads);
    m.num_query_groups = r.integer_or("num_query_groups", m.num_attention_heads, 1, kMaxHeads);
    m.head_dim = r.integer_or("head_dim", 0, 1, kMaxHidden); // 0: derived below
    m.ffn_hidden_size = r.integer("ffn_hidden_size", 1, kMaxFfn);
    m.vocab_size = r.integer("vocab_size", 1, kMaxVocab);
    m.max_position_embeddings = r.integer("max_position_embeddings", 1, kMaxPositions);
    m.activation = read_enum<Activation>(r, "activation", kActivationNames);
    m.normalization = read_enum<Normalization>(r, "normalization", kNormalizationNames);
    m.position_embedding = read_enum<PositionEmbedding>(r, "position_embedding", kPositionNames);
    m.rotary_base = r.number_or("rotary_base", 10000.0, 2.0, 1e12);
    m.norm_epsilon = r.number_or("norm_epsilon", 1e-5, 1e-12, 1.0);
    m.make_vocab_size_divisible_by = r.integer_or("make_vocab_size_divisible_by", 128, 1, 1 << 20);
    m.tied_embeddings = r.boolean("tied_embeddings");
    m.linear_bias = r.boolean("linear_bias");
    m.dropout = r.boolean_or("dropout", false);
    if (const Json* moe = r.get("moe"); moe && !moe->is_null())
        m.moe = moe_from_json(*moe, r.field("moe"));
    if (const Json* mla = r.get("mla"); mla && !mla->is_null())
        m.mla = mla_from_json(*mla, r.field("mla"));
    m.mtp_num_layers = r.integer_or("mtp_num_layers", 0, 0, limits::kMaxMtpLayers);
    m.mtp_loss_scaling_factor = r.number_or("mtp_loss_scaling_factor", 0.1, 0.0, 1.0e3);
    if (const Json* p = r.get("precision"))
        m.precision = precision_from_json(*p, r.field("precision"));
    r.finish();
    if (m.head_dim == 0) {
        if (m.hidden_size % m.num_attention_heads != 0)
            throw SpecError(r.field("num_attention_heads"),
                            std::to_string(m.num_attention_heads) + " must divide hidden_size " +
                                std::to_string(m.hidden_size) + " (or give head_dim)");
        m.head_dim = m.hidden_size / m.num_attention_heads;
    }
    validate(m, path);
    return m;
}

void validate(const ModelSpec& m, const std::string& path) {
    const auto f = [&](std::string_view key) { return path + "." + std::string(key); };
    if (m.num_query_groups > m.num_attention_heads || m.num_attention_heads % m.num_query_groups)
        throw SpecError(f("num_query_groups"), std::to_string(m.num_query_groups) +
                                                   " must divide num_attention_heads " +
                                                   std::to_string(m.num_attention_heads));
    if (m.mla && m.num_query_groups != m.num_attention_heads)
        throw SpecError(f("num_query_groups"),
                        "must equal num_attention_heads with multi-head latent attention");
    if (m.moe) {
        const MoeSpec& e = *m.moe;
        if (e.top_k > e.num_experts)
            throw SpecError(f("moe.top_k"), std::to_string(e.top_k) + " exceeds num_experts " +
                                                std::to_string(e.num_experts));
        if (m.num_moe_layers() == 0)
            throw SpecError(f("moe.first_dense_layers"),
                            "leaves no MoE layer among num_layers " + std::to_string(m.num_layers));
    }
    for (const Dtype d : {Dtype::fp8, Dtype::fp4})
        if (m.precision.params == d || m.precision.grads == d)
            throw SpecError(f("precision"), to_string(d) +
                                                " is a compute type here; store params and grads "
                                                "as bf16, fp16 or fp32");
    if (m.precision.optimizer_state == Dtype::fp4)
        throw SpecError(f("precision.optimizer_state"),
                        "fp4 moments are not Megatron's (--exp-avg-dtype: fp32, fp16, bf16, fp8)");
    // Bound the size so parameter and FLOP counts stay exact in 64-bit integers.
    const double h = double(m.hidden_size);
    double per_layer = 4.0 * h * double(m.num_attention_heads) * double(m.head_dim) +
                       3.0 * h * double(m.ffn_hidden_size);
    if (m.mla)
        per_layer += 4.0 * h * double(m.num_attention_heads) *
                     double(m.mla->qk_head_dim + m.mla->qk_pos_emb_head_dim + m.mla->v_head_dim +
                            m.mla->kv_lora_rank + m.mla->q_lora_rank);
    if (m.moe)
        per_layer += 3.0 * h * double(m.moe->num_experts + 1) *
                     double(m.moe->expert_ffn_hidden_size + m.moe->shared_expert_ffn_hidden_size);
    const double estimate = double(m.num_layers + m.mtp_num_layers) * per_layer +
                            2.0 * h * double(m.vocab_size + m.max_position_embeddings);
    if (estimate > limits::kMaxParameters)
        throw SpecError(path, "model is too large (over 1e16 parameters)");
}

Json to_json(const ModelSpec& m) {
    Json j;
    j["format"] = "trident.model/1";
    j["name"] = m.name;
    if (!m.source.empty()) j["source"] = m.source;
    j["num_layers"] = m.num_layers;
    j["hidden_size"] = m.hidden_size;
    j["num_attention_heads"] = m.num_attention_heads;
    j["num_query_groups"] = m.num_query_groups;
    j["head_dim"] = m.head_dim;
    j["ffn_hidden_size"] = m.ffn_hidden_size;
    j["vocab_size"] = m.vocab_size;
    j["max_position_embeddings"] = m.max_position_embeddings;
    j["activation"] = to_string(m.activation);
    j["normalization"] = to_string(m.normalization);
    j["position_embedding"] = to_string(m.position_embedding);
    if (m.position_embedding == PositionEmbedding::rope) j["rotary_base"] = m.rotary_base;
    j["norm_epsilon"] = m.norm_epsilon;
    j["make_vocab_size_divisible_by"] = m.make_vocab_size_divisible_by;
    j["tied_embeddings"] = m.tied_embeddings;
    j["linear_bias"] = m.linear_bias;
    j["dropout"] = m.dropout;
    if (m.moe) {
        const MoeSpec& e = *m.moe;
        Json o;
        o["num_experts"] = e.num_experts;
        o["top_k"] = e.top_k;
        o["expert_ffn_hidden_size"] = e.expert_ffn_hidden_size;
        o["shared_expert_ffn_hidden_size"] = e.shared_expert_ffn_hidden_size;
        o["layer_frequency"] = e.layer_frequency;
        o["first_dense_layers"] = e.first_dense_layers;
        o["capacity_factor"] = e.capacity_factor ? Json(*e.capacity_factor) : Json(nullptr);
        if (e.pad_to_capacity) o["pad_to_capacity"] = true;
        o["aux_loss_coeff"] = e.aux_loss_coeff;
        if (e.z_loss_coeff > 0) o["z_loss_coeff"] = e.z_loss_coeff;
        if (e.load_balance != LoadBalance::forced) o["load_balance"] = load_balance_json(e);
        if (e.router_num_groups > 0) {
            o["router_num_groups"] = e.router_num_groups;
            o["router_group_topk"] = e.router_group_topk;
        }
        j["moe"] = o;
    }
    if (m.mla) {
        Json o;
        o["q_lora_rank"] = m.mla->q_lora_rank;
        o["kv_lora_rank"] = m.mla->kv_lora_rank;
        o["qk_head_dim"] = m.mla->qk_head_dim;
        o["qk_pos_emb_head_dim"] = m.mla->qk_pos_emb_head_dim;
        o["v_head_dim"] = m.mla->v_head_dim;
        j["mla"] = o;
    }
    if (m.mtp_num_layers > 0) {
        j["mtp_num_layers"] = m.mtp_num_layers;
        j["mtp_loss_scaling_factor"] = m.mtp_loss_scaling_factor;
    }
    j["precision"] = {{"params", to_string(m.precision.params)},
                      {"grads", to_string(m.precision.grads)},
                      {"optimizer_state", to_string(m.precision.optimizer_state)},
                      {"master_weights", m.precision.master_weights}};
    return j;
}

} // namespace trident::core
