#include "trident/core/model_layout.h"

#include "trident/core/internal_error.h"
#include "trident/core/schedule.h"

#include <algorithm>
#include <cmath>

namespace trident::core {
namespace {

using Runs = std::vector<std::pair<std::int64_t, std::int64_t>>;

// Row blocks (first row, rows) of a [rows × cols] tensor, as flat runs.
Runs row_runs(std::int64_t cols, const Runs& blocks) {
    Runs out;
    for (auto [begin, count] : blocks)
        if (count > 0) out.push_back({begin * cols, count * cols});
    return out;
}

// A column block [begin, begin + count) of every row of a [rows × cols] tensor.
Runs column_runs(std::int64_t rows, std::int64_t cols, std::int64_t begin, std::int64_t count) {
    if (count == cols) return {{0, rows * cols}}; // every column: the whole tensor
    Runs out;
    for (std::int64_t r = 0; r < rows; ++r) out.push_back({r * cols + begin, count});
    return out;
}

constexpr float kInitStd = 0.02f; // GPT-2 / Megatron --init-method-std

// GPT-2's scaled init of the residual projections: 0.02 / √(2L) (computed in float, as the
// generators draw floats).
double residual_std(const ModelSpec& m) {
    return double(kInitStd / std::sqrt(2.0f * float(m.num_layers)));
}

const char* role_name(TensorRole role) {
    switch (role) {
    case TensorRole::word_embedding:
        return "embedding.word";
    case TensorRole::position_embedding:
        return "embedding.position";
    case TensorRole::norm1_weight:
        return "norm1.weight";
    case TensorRole::norm1_bias:
        return "norm1.bias";
    case TensorRole::qkv_weight:
        return "qkv.weight";
    case TensorRole::qkv_bias:
        return "qkv.bias";
    case TensorRole::mla_q_down:
        return "mla.q_down.weight";
    case TensorRole::mla_q_norm:
        return "mla.q_norm.weight";
    case TensorRole::mla_q_norm_bias:
        return "mla.q_norm.bias";
    case TensorRole::mla_q_up:
        return "mla.q_up.weight";
    case TensorRole::mla_kv_down:
        return "mla.kv_down.weight";
    case TensorRole::mla_kv_norm:
        return "mla.kv_norm.weight";
    case TensorRole::mla_kv_norm_bias:
        return "mla.kv_norm.bias";
    case TensorRole::mla_kv_up:
        return "mla.kv_up.weight";
    case TensorRole::proj_weight:
        return "proj.weight";
    case TensorRole::proj_bias:
        return "proj.bias";
    case TensorRole::norm2_weight:
        return "norm2.weight";
    case TensorRole::norm2_bias:
        return "norm2.bias";
    case TensorRole::fc1_weight:
        return "fc1.weight";
    case TensorRole::fc1_bias:
        return "fc1.bias";
    case TensorRole::fc2_weight:
        return "fc2.weight";
    case TensorRole::fc2_bias:
        return "fc2.bias";
    case TensorRole::router_weight:
        return "router.weight";
    case TensorRole::shared_fc1_weight:
        return "shared.fc1.weight";
    case TensorRole::shared_fc1_bias:
        return "shared.fc1.bias";
    case TensorRole::shared_fc2_weight:
        return "shared.fc2.weight";
    case TensorRole::shared_fc2_bias:
        return "shared.fc2.bias";
    case TensorRole::expert_fc1_weight:
        return "fc1.weight";
    case TensorRole::expert_fc1_bias:
        return "fc1.bias";
    case TensorRole::expert_fc2_weight:
        return "fc2.weight";
    case TensorRole::expert_fc2_bias:
        return "fc2.bias";
    case TensorRole::final_norm_weight:
        return "final_norm.weight";
    case TensorRole::final_norm_bias:
        return "final_norm.bias";
    case TensorRole::output_weight:
        return "output.weight";
    case TensorRole::mtp_enorm_weight:
        return "mtp.enorm.weight";
    case TensorRole::mtp_enorm_bias:
        return "mtp.enorm.bias";
    case TensorRole::mtp_hnorm_weight:
        return "mtp.hnorm.weight";
    case TensorRole::mtp_hnorm_bias:
        return "mtp.hnorm.bias";
    case TensorRole::mtp_eh_proj:
        return "mtp.eh_proj.weight";
    case TensorRole::mtp_final_norm_weight:
        return "mtp.final_norm.weight";
    case TensorRole::mtp_final_norm_bias:
        return "mtp.final_norm.bias";
    }
    return "?";
}

// The roles of an MLP's four tensors, from its first (fc1 weight).
TensorRole offset_role(TensorRole first, int k) {
    return TensorRole(int(first) + k);
}

// Runs only when the layout keeps placements (a counting layout allocates nothing).
template <typename F, typename... A>
Runs runs_if(bool placing, F f, A&&... args) {
    return placing ? f(std::forward<A>(args)...) : Runs{};
}

TensorLayout tensor(TensorRole role, std::int64_t layer = -1, std::int64_t expert = -1) {
    TensorLayout t;
    t.role = role;
    t.layer = layer;
    t.expert = expert;
    return t;
}

// A [rows × cols] tensor of which this rank stores `runs` (`size` elements), initialised
// N(0, std²), or zeros when `std` is 0.
TensorLayout sharded(TensorRole role, std::int64_t layer, std::int64_t expert, std::int64_t rows,
                     std::int64_t cols, Runs runs, std::int64_t size, TensorFlags flags,
                     double std) {
    TensorLayout t = tensor(role, layer, expert);
    t.full_rows = rows;
    t.full_cols = cols;
    t.size = size;
    t.placement = std::move(runs);
    t.flags = flags;
    t.init = std == 0.0 ? TensorInit::zeros : TensorInit::normal;
    t.init_std = std;
    return t;
}

// A matrix every tensor rank holds whole (the router, the learned positions).
TensorLayout replicated(TensorRole role, std::int64_t layer, std::int64_t rows, std::int64_t cols) {
    return sharded(role, layer, -1, rows, cols, {{0, rows * cols}}, rows * cols,
                   {.decay = true, .tp_replicated = true}, kInitStd);
}

} // namespace

std::string TensorLayout::init_name() const {
    std::string out;
    if (layer >= 0) out = "layer." + std::to_string(layer) + ".";
    if (expert >= 0) out += "expert." + std::to_string(expert) + ".";
    // The last stage's copy of a tied embedding is generated as the embedding itself.
    if (role == TensorRole::output_weight && flags.tied_embedding) return "embedding.word";
    return out + role_name(role);
}

std::string TensorLayout::name() const {
    if (role == TensorRole::output_weight && flags.tied_embedding)
        return "embedding.word.tied_copy";
    if (role == TensorRole::word_embedding && flags.duplicate) return "embedding.word.mtp_copy";
    return init_name();
}

ChunkShape ChunkShape::of(const JobSpec& job, std::int32_t pipeline_rank, std::int32_t chunk,
                          std::int64_t tp_rank, std::int64_t ep_rank, std::int64_t cp,
                          std::int64_t etp_rank) {
    const ModelSpec& m = job.model;
    const ParallelPlan& p = job.plan;
    ChunkShape s;
    s.pipeline_rank = pipeline_rank;
    s.chunk = chunk;
    s.virtual_stage = core::virtual_stage(p.schedule, chunk, std::int32_t(p.pp), pipeline_rank);
    s.tp = p.tp;
    s.tp_rank = tp_rank;
    s.ep_rank = ep_rank;
    s.first = s.virtual_stage == 0;
    s.last = s.virtual_stage == p.model_stages() - 1;
    const PipelineSplit split = job.pipeline_split();
    s.layers = split.layers_of(s.virtual_stage);
    s.first_layer = split.first_layer(s.virtual_stage);
    s.micro_batch = p.micro_batch_size;
    s.sequence = job.training.seq_length;
    s.local_sequence = s.sequence / cp;
    s.tokens = s.micro_batch * s.local_sequence;
    const bool sp = p.sequence_parallel && p.tp > 1;
    s.rows = sp ? s.tokens / p.tp : s.tokens;
    s.first_row = sp ? tp_rank * s.rows : 0;
    s.hidden = m.hidden_size;
    s.head_dim = m.head_dim;
    s.local_heads = m.num_attention_heads / p.tp;
    s.local_kv_groups = m.num_query_groups / p.tp;
    s.local_ffn = m.ffn_hidden_size / p.tp;
    s.vocab = m.vocab_size;
    s.padded_vocab = m.padded_vocab_size(p.tp);
    s.local_vocab = s.padded_vocab / p.tp;
    s.vocab_start = tp_rank * s.local_vocab;
    if (m.moe) {
        s.local_experts = m.moe->num_experts / p.ep;
        s.first_expert = ep_rank * s.local_experts;
        s.etp = p.expert_tp();
        // A rank's expert-tp index is tp_rank mod etp when etp divides tp; other foldings name
        // it (the executor, from its RankCoord) or are laid out for rank 0 only (the
        // simulator's counts).
        if (etp_rank < 0 && p.tp % s.etp != 0 && tp_rank != 0)
            throw InternalError("expert layout of tp rank " + std::to_string(tp_rank) +
                                " with etp " + std::to_string(s.etp) + " not dividing tp " +
                                std::to_string(p.tp));
        s.etp_rank = etp_rank >= 0 ? etp_rank : tp_rank % s.etp;
        s.local_expert_ffn = m.moe->expert_ffn_hidden_size / s.etp;
    }
    return s;
}

ChunkLayout::ChunkLayout(const JobSpec& job, std::int32_t pipeline_rank, std::int32_t chunk,
                         std::int64_t tp_rank, std::int64_t ep_rank, std::int64_t cp,
                         LayoutDetail detail, std::int64_t etp_rank)
    : job_(&job), detail_(detail),
      shape_(ChunkShape::of(job, pipeline_rank, chunk, tp_rank, ep_rank, cp, etp_rank)) {
    const ModelSpec& m = job.model;
    if (shape_.first) {
        // Summed with its last-stage copy when tied, or when MTP looks the next tokens up there
        // (a last stage on another rank: the loop placement at pp > 1).
        const bool mtp_copy = m.mtp_num_layers > 0 && job.plan.pp > 1 &&
                              placement_of(job.plan.schedule) == StagePlacement::loop;
        add_vocab_table(TensorRole::word_embedding, false, m.tied_embeddings || mtp_copy);
        if (m.position_embedding == PositionEmbedding::learned) {
            add(replicated(TensorRole::position_embedding, -1, m.max_position_embeddings,
                           m.hidden_size));
        }
        close_unit({parameters_, 0, 0});
    }
    // Counting, every dense layer holds as much as every other, and so does every MoE layer:
    // each kind is laid out once (the planner counts a layout per candidate and stage).
    // [moe] → {parameters, experts, linear weights}
    // [moe] → {parameters, experts, linear weights, expert linear weights}
    std::int64_t per_kind[2][4] = {{-1, 0, 0, 0}, {-1, 0, 0, 0}};
    for (std::int64_t layer = shape_.first_layer; layer < shape_.first_layer + shape_.layers;
         ++layer) {
        std::int64_t* kind = per_kind[m.is_moe_layer(layer) ? 1 : 0];
        const bool fp8 = job.layer_fp8(layer) != Fp8Recipe::none;
        if (!placing() && kind[0] >= 0) {
            parameters_ += kind[0];
            expert_parameters_ += kind[1];
            linear_parameters_ += kind[2];
            if (fp8) fp8_parameters_ += kind[2];
            close_unit({kind[0] - kind[1], kind[1], fp8 ? kind[2] : 0, fp8 ? kind[3] : 0});
            continue;
        }
        const std::int64_t before = parameters_, experts_before = expert_parameters_,
                           linear_before = linear_parameters_,
                           expert_linear_before = expert_linear_parameters_;
        add_layer(layer);
        kind[0] = parameters_ - before;
        kind[1] = expert_parameters_ - experts_before;
        kind[2] = linear_parameters_ - linear_before;
        kind[3] = expert_linear_parameters_ - expert_linear_before;
        if (fp8) fp8_parameters_ += kind[2];
        close_unit({kind[0] - kind[1], kind[1], fp8 ? kind[2] : 0, fp8 ? kind[3] : 0});
    }
    if (shape_.last) {
        const std::int64_t before = parameters_;
        add_norm(TensorRole::final_norm_weight, TensorRole::final_norm_bias, -1, m.hidden_size,
                 true);
        // Tied on one chunk holding both ends: the head is the embedding itself.
        if (!m.tied_embeddings || !shape_.first)
            add_vocab_table(TensorRole::output_weight, m.tied_embeddings, m.tied_embeddings);
        // MTP looks up the next tokens' embeddings here: a copy of the table (summed with the
        // first stage's) unless the head already is one or this rank's other chunk holds the
        // embedding — V-shaped schedules and DualPipe put the first and last stages on one rank,
        // which is how DeepSeek-V3 shares them physically (§3.2.3).
        if (m.mtp_num_layers > 0 && !m.tied_embeddings && !rank_holds_first_stage(job))
            add_vocab_table(TensorRole::word_embedding, true, true);
        close_unit({parameters_ - before, 0, 0});
        add_mtp_modules();
    }
}

bool ChunkLayout::rank_holds_first_stage(const JobSpec& job) const {
    const ParallelPlan& p = job.plan;
    for (std::int32_t c = 0; c < std::int32_t(p.vpp); ++c)
        if (core::virtual_stage(p.schedule, c, std::int32_t(p.pp), shape_.pipeline_rank) == 0)
            return true;
    return false;
}

void ChunkLayout::add_mtp_modules() {
    const ModelSpec& m = job_->model;
    const std::int64_t h = m.hidden_size, r = shape_.tp_rank, local = h / shape_.tp;
    for (std::int64_t depth = 0; depth < m.mtp_num_layers; ++depth) {
        const std::int64_t layer = m.num_layers + depth;
        const std::int64_t before = parameters_, experts_before = expert_parameters_,
                           linear_before = linear_parameters_,
                           expert_linear_before = expert_linear_parameters_;
        add_norm(TensorRole::mtp_enorm_weight, TensorRole::mtp_enorm_bias, layer, h, true);
        add_norm(TensorRole::mtp_hnorm_weight, TensorRole::mtp_hnorm_bias, layer, h, true);
        // eh_proj: [h × 2h], output rows split over tensor ranks (Megatron's ColumnParallelLinear).
        add(sharded(TensorRole::mtp_eh_proj, layer, -1, h, 2 * h,
                    runs_if(placing(), row_runs, 2 * h, Runs{{r * local, local}}), local * 2 * h,
                    {.decay = true}, kInitStd));
        add_layer(layer);
        add_norm(TensorRole::mtp_final_norm_weight, TensorRole::mtp_final_norm_bias, layer, h,
                 true);
        const bool fp8 = job_->layer_fp8(layer) != Fp8Recipe::none;
        const std::int64_t linear = linear_parameters_ - linear_before,
                           expert_linear = expert_linear_parameters_ - expert_linear_before;
        if (fp8) fp8_parameters_ += linear;
        const std::int64_t experts = expert_parameters_ - experts_before;
        close_unit(
            {parameters_ - before - experts, experts, fp8 ? linear : 0, fp8 ? expert_linear : 0});
    }
}

namespace {

// The weights of the layers Transformer Engine runs as FP8 linears: the same set the cost model
// times in FP8 (simulator/layer_ops: every linear of a transformer layer but the router).
bool fp8_linear_weight(TensorRole role) {
    switch (role) {
    case TensorRole::qkv_weight:
    case TensorRole::mla_q_down:
    case TensorRole::mla_q_up:
    case TensorRole::mla_kv_down:
    case TensorRole::mla_kv_up:
    case TensorRole::proj_weight:
    case TensorRole::fc1_weight:
    case TensorRole::fc2_weight:
    case TensorRole::shared_fc1_weight:
    case TensorRole::shared_fc2_weight:
    case TensorRole::expert_fc1_weight:
    case TensorRole::expert_fc2_weight:
    case TensorRole::mtp_eh_proj:
        return true;
    default:
        return false;
    }
}

} // namespace

void ChunkLayout::add(TensorLayout t) {
    parameters_ += repeat_ * t.size;
    if (fp8_linear_weight(t.role)) linear_parameters_ += repeat_ * t.size;
    if (fp8_linear_weight(t.role) && t.flags.expert) expert_linear_parameters_ += repeat_ * t.size;
    if (t.flags.expert) expert_parameters_ += repeat_ * t.size;
    if (!placing()) return;
    // Adjacent runs merge: a tensor this rank holds whole is one run.
    Runs merged;
    for (const auto& run : t.placement)
        if (!merged.empty() && merged.back().first + merged.back().second == run.first)
            merged.back().second += run.second;
        else
            merged.push_back(run);
    t.placement = std::move(merged);
    index_[{t.role, t.layer, t.expert}] = std::int64_t(tensors_.size());
    tensors_.push_back(std::move(t));
}

void ChunkLayout::close_unit(ShardUnit unit) {
    units_.push_back(unit);
    unit_ends_.push_back(tensors_.size());
}

std::int32_t ChunkLayout::unit_of(std::size_t tensor) const {
    if (!placing() || tensor >= tensors_.size())
        throw InternalError("ChunkLayout::unit_of: tensor " + std::to_string(tensor) + " of " +
                            std::to_string(tensors_.size()) + " placed");
    return std::int32_t(std::upper_bound(unit_ends_.begin(), unit_ends_.end(), tensor) -
                        unit_ends_.begin());
}

std::int64_t ChunkLayout::find(TensorRole role, std::int64_t layer, std::int64_t expert) const {
    const auto it = index_.find({role, layer, expert});
    return it == index_.end() ? -1 : it->second;
}

void ChunkLayout::add_norm(TensorRole weight, TensorRole bias, std::int64_t layer,
                           std::int64_t width, bool sequence_partial) {
    const bool sp = job_->plan.sequence_parallel && sequence_partial;
    for (TensorRole role : {weight, bias}) {
        if (role == bias && job_->model.normalization != Normalization::layernorm) break;
        TensorLayout t = tensor(role, layer);
        t.full_rows = width;
        t.size = width;
        t.placement = {{0, width}};
        t.flags = {.tp_replicated = true, .sequence_partial = sp};
        t.init = role == weight ? TensorInit::ones : TensorInit::zeros;
        add(std::move(t));
    }
}

void ChunkLayout::add_layer(std::int64_t layer) {
    const ModelSpec& m = job_->model;
    add_norm(TensorRole::norm1_weight, TensorRole::norm1_bias, layer, m.hidden_size, true);
    add_attention(layer);
    add_norm(TensorRole::norm2_weight, TensorRole::norm2_bias, layer, m.hidden_size, true);
    if (!m.is_moe_layer(layer)) {
        add_mlp(layer, m.ffn_hidden_size, shape_.local_ffn, TensorRole::fc1_weight, -1, false);
        return;
    }
    const MoeSpec& e = *m.moe;
    // Under sequence parallelism each tensor rank routes its own rows: its router gradient is
    // partial, summed over the tensor group like the norms'.
    TensorLayout router =
        replicated(TensorRole::router_weight, layer, e.num_experts, m.hidden_size);
    router.flags.sequence_partial = shape_.rows != shape_.tokens;
    add(std::move(router));
    if (e.shared_expert_ffn_hidden_size > 0)
        add_mlp(layer, e.shared_expert_ffn_hidden_size, e.shared_expert_ffn_hidden_size / shape_.tp,
                TensorRole::shared_fc1_weight, -1, false);
    if (!placing()) { // every local expert has the same tensors
        repeat_ = shape_.local_experts;
        if (repeat_ > 0)
            add_mlp(layer, e.expert_ffn_hidden_size, shape_.local_expert_ffn,
                    TensorRole::expert_fc1_weight, shape_.first_expert, true);
        repeat_ = 1;
        return;
    }
    for (std::int64_t x = shape_.first_expert; x < shape_.first_expert + shape_.local_experts; ++x)
        add_mlp(layer, e.expert_ffn_hidden_size, shape_.local_expert_ffn,
                TensorRole::expert_fc1_weight, x, true);
}

void ChunkLayout::add_attention(std::int64_t layer) {
    const ModelSpec& m = job_->model;
    const std::int64_t h = m.hidden_size, r = shape_.tp_rank, H = m.num_attention_heads;
    const auto matrix = [&](TensorRole role, std::int64_t rows, std::int64_t cols, Runs runs,
                            std::int64_t size, TensorFlags flags, double std) {
        add(sharded(role, layer, -1, rows, cols, std::move(runs), size, flags, std));
    };
    std::int64_t context_width = H * m.head_dim; // the attention core's output, all heads
    if (!m.mla) {
        // QKV column-parallel over heads: this rank's query heads, then its key and value groups.
        const std::int64_t D = m.head_dim, KV = m.num_query_groups;
        const std::int64_t Hl = shape_.local_heads, KVl = shape_.local_kv_groups;
        const std::int64_t rows = (H + 2 * KV) * D, local = (Hl + 2 * KVl) * D;
        const Runs blocks = {
            {r * Hl * D, Hl * D}, {(H + r * KVl) * D, KVl * D}, {(H + KV + r * KVl) * D, KVl * D}};
        matrix(TensorRole::qkv_weight, rows, h, runs_if(placing(), row_runs, h, blocks), local * h,
               {.decay = true}, kInitStd);
        if (m.linear_bias)
            matrix(TensorRole::qkv_bias, rows, 1, runs_if(placing(), row_runs, 1, blocks), local,
                   {}, 0.0);
    } else {
        // Multi-head latent attention (DeepSeek-V2 §2.1): the down projections and their norms
        // replicated over tensor ranks (as DeepSeek's reference code), the up projections
        // column-parallel over heads.
        const MlaSpec& a = *m.mla;
        const std::int64_t Hl = shape_.local_heads, qk = a.qk_head_dim + a.qk_pos_emb_head_dim;
        const std::int64_t kv_out = a.qk_head_dim + a.v_head_dim;
        const auto whole = [](std::int64_t n) { return Runs{{0, n}}; };
        // Each tensor rank backpropagates only its heads into the replicated parts.
        const TensorFlags partial{.decay = true, .tp_replicated = true, .tensor_partial = true};
        const auto mark_norms_partial = [&](std::size_t added) {
            for (std::size_t i = tensors_.size() - added; i < tensors_.size(); ++i)
                tensors_[i].flags.tensor_partial = true;
        };
        const std::size_t norm_tensors = m.normalization == Normalization::layernorm ? 2 : 1;
        std::int64_t q_in = h;
        if (a.q_lora_rank > 0) {
            matrix(TensorRole::mla_q_down, a.q_lora_rank, h, whole(a.q_lora_rank * h),
                   a.q_lora_rank * h, partial, kInitStd);
            add_norm(TensorRole::mla_q_norm, TensorRole::mla_q_norm_bias, layer, a.q_lora_rank,
                     false);
            if (placing()) mark_norms_partial(norm_tensors);
            q_in = a.q_lora_rank;
        }
        matrix(TensorRole::mla_q_up, H * qk, q_in,
               runs_if(placing(), row_runs, q_in, Runs{{r * Hl * qk, Hl * qk}}), Hl * qk * q_in,
               {.decay = true}, kInitStd);
        const std::int64_t kv_rows = a.kv_lora_rank + a.qk_pos_emb_head_dim;
        matrix(TensorRole::mla_kv_down, kv_rows, h, whole(kv_rows * h), kv_rows * h, partial,
               kInitStd);
        add_norm(TensorRole::mla_kv_norm, TensorRole::mla_kv_norm_bias, layer, a.kv_lora_rank,
                 false);
        if (placing()) mark_norms_partial(norm_tensors);
        matrix(TensorRole::mla_kv_up, H * kv_out, a.kv_lora_rank,
               runs_if(placing(), row_runs, a.kv_lora_rank, Runs{{r * Hl * kv_out, Hl * kv_out}}),
               Hl * kv_out * a.kv_lora_rank, {.decay = true}, kInitStd);
        context_width = H * a.v_head_dim;
    }
    // Output projection row-parallel over the same heads; its bias added once after the sum.
    const std::int64_t local_width = context_width / shape_.tp;
    matrix(TensorRole::proj_weight, h, context_width,
           runs_if(placing(), column_runs, h, context_width, r * local_width, local_width),
           h * local_width, {.decay = true}, residual_std(m));
    if (m.linear_bias)
        matrix(TensorRole::proj_bias, h, 1, {{0, h}}, h, {.tp_replicated = true}, 0.0);
}

void ChunkLayout::add_mlp(std::int64_t layer, std::int64_t ffn, std::int64_t local_ffn,
                          TensorRole first_role, std::int64_t expert, bool is_expert) {
    const ModelSpec& m = job_->model;
    const std::int64_t h = m.hidden_size, r = is_expert ? shape_.etp_rank : shape_.tp_rank;
    const std::int64_t gate = m.activation == Activation::swiglu ? 2 : 1;
    // First GEMM column-parallel (SwiGLU keeps its gate and up halves each split), second
    // row-parallel.
    Runs fc_rows = {{r * local_ffn, local_ffn}};
    if (gate == 2) fc_rows.push_back({ffn + r * local_ffn, local_ffn});
    const auto add_one = [&](int k, std::int64_t rows, std::int64_t cols, Runs runs,
                             std::int64_t size, TensorFlags flags, double std) {
        flags.expert = is_expert;
        add(sharded(offset_role(first_role, k), layer, expert, rows, cols, std::move(runs), size,
                    flags, std));
    };
    add_one(0, gate * ffn, h, runs_if(placing(), row_runs, h, fc_rows), gate * local_ffn * h,
            {.decay = true}, kInitStd);
    if (m.linear_bias)
        add_one(1, gate * ffn, 1, runs_if(placing(), row_runs, 1, fc_rows), gate * local_ffn, {},
                0.0);
    add_one(2, h, ffn, runs_if(placing(), column_runs, h, ffn, r * local_ffn, local_ffn),
            h * local_ffn, {.decay = true}, residual_std(m));
    // The second bias is added once after the row-parallel sum: replicated (an expert's too).
    if (m.linear_bias)
        add_one(3, h, 1, {{0, h}}, h, {.tp_replicated = !is_expert || shape_.etp > 1}, 0.0);
}

void ChunkLayout::add_vocab_table(TensorRole role, bool duplicate, bool tied) {
    const ModelSpec& m = job_->model;
    const std::int64_t h = m.hidden_size;
    TensorLayout t = tensor(role);
    t.full_rows = m.vocab_size; // padding rows belong to no full tensor
    t.full_cols = h;
    t.size = shape_.local_vocab * h;
    const std::int64_t rows =
        std::max<std::int64_t>(0, std::min(shape_.local_vocab, m.vocab_size - shape_.vocab_start));
    t.placement = runs_if(placing(), row_runs, h, Runs{{shape_.vocab_start, rows}});
    t.flags = {.decay = true, .duplicate = duplicate, .tied_embedding = tied};
    t.init = TensorInit::normal;
    t.init_std = kInitStd;
    add(std::move(t));
}

} // namespace trident::core
