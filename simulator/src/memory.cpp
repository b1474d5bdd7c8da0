#include "trident/simulator/memory.h"

#include "trident/core/model_layout.h"
#include "trident/core/parameter_count.h"
#include "trident/core/schedule.h"
#include "trident/core/step_numbers.h"
#include "trident/simulator/device_memory.h"
#include "trident/simulator/flops.h"

#include <algorithm>
#include <array>

namespace trident::simulator {

namespace {

// Bytes per element of a linear layer's saved input: FP8 and NVFP4 layers keep the cast,
// transposed copy Transformer Engine made for the weight gradient (1 byte; NVFP4 0.5 + a
// scale per 16), the others the activation itself (`eb`).
double linear_input_bytes(const LayerView& v, double eb) {
    return v.fp8 != core::Fp8Recipe::none ? core::quantized_bytes(v.fp8) : eb;
}

double mask_bytes(const core::ModelSpec& m, double elements) {
    return m.dropout ? elements : 0.0;
}

// What an MoE block keeps beyond its input: router probabilities, the routed copies through
// the experts, and the shared experts' intermediates — less what selective recomputation of
// moe_act or shared_experts rebuilds. `lb`: bytes of an FP8 linear layer's saved input.
double moe_block_bytes(const core::ModelSpec& m, const LayerView& v, double lb) {
    const double eb = double(core::dtype_bytes(m.precision.params));
    const double t = double(v.tp), sd = v.sequence_parallel ? t : 1.0;
    const double T = double(v.tokens()), h = double(m.hidden_size);
    const double gate = m.activation == core::Activation::swiglu ? 2.0 : 1.0;
    const core::MoeSpec& e = *m.moe;
    const double routed = routed_copies(e, v);
    const double fe = double(e.expert_ffn_hidden_size), et = double(v.etp);
    // Megatron-Core's grouped experts weight each copy by its routing probability inside the
    // activation (experts.py: weighted_bias_swiglu_impl on the permuted probabilities), so
    // the combine only sums rows back and keeps nothing; the probabilities' gradient comes
    // from the activation's own inputs.
    double bytes = 4.0 * T * double(e.num_experts) / sd // fp32 router probabilities
                   + 4.0 * routed                       // each copy's probability (fp32)
                   + lb * routed * h                    // permuted tokens (expert fc1 input)
                   + eb * routed * fe * gate / et;      // expert fc1 output
    if (!v.recomputes(core::RecomputeModule::moe_act)) bytes += lb * routed * fe / et; // act out
    if (e.shared_expert_ffn_hidden_size > 0 &&
        !v.recomputes(core::RecomputeModule::shared_experts)) {
        const double fs = double(e.shared_expert_ffn_hidden_size);
        bytes += eb * T * fs * gate / t + lb * T * fs / t;
    }
    return bytes;
}

} // namespace

double activation_bytes(const core::ModelSpec& m, const LayerView& v, std::int64_t layer) {
    const bool flash_attention = v.flash_attention;
    const double eb = double(core::dtype_bytes(m.precision.params)); // bytes per activation
    const double lb = linear_input_bytes(v, eb);
    const double t = double(v.tp), sd = v.sequence_parallel ? t : 1.0;
    const double T = double(v.tokens());
    const double h = double(m.hidden_size), s = double(v.seq);
    const double heads = double(m.num_attention_heads);
    if (v.recompute == core::RecomputeGranularity::full) return eb * T * h / sd; // layer input

    // Attention block (Korthikanti et al. 2022, §4.1): norm input, QKV input, Q and K, V,
    // output-projection input, dropout mask; plus the score tensors unless flash attention.
    // The context (the output projection's input) has a value head per query head, whatever
    // the KV groups: heads · value head dim.
    double q_width, k_width, v_width, context_width, latents = 0.0;
    if (m.mla) {
        const core::MlaSpec& a = *m.mla;
        q_width = k_width = heads * double(a.qk_head_dim + a.qk_pos_emb_head_dim);
        v_width = context_width = heads * double(a.v_head_dim);
        // Each latent's norm input and output (the up-projection's input), as Megatron-Core's
        // separate q/kv layernorms and TE linears keep them — the outputs not when the
        // layernorm recomputation rebuilds every norm (DeepSeek-V3 §3.2.3); the shared rotary
        // key is part of K.
        const bool norms_rebuilt = v.recomputes(core::RecomputeModule::layernorm);
        latents = lb * T * (norms_rebuilt ? 1.0 : 2.0) * double(a.q_lora_rank + a.kv_lora_rank);
    } else {
        q_width = context_width = heads * double(m.head_dim);
        k_width = v_width = double(m.num_query_groups) * double(m.head_dim);
    }
    using core::RecomputeModule;
    // Selective recomputation's output-discarding modules: MLA's separate input norm (its
    // output is the projections' input) and its up-projections (Q, K, V) are rebuilt.
    const bool norm_rebuilt = m.mla && v.recomputes(RecomputeModule::layernorm);
    const bool qkv_rebuilt = m.mla && v.recomputes(RecomputeModule::mla_up_proj);
    double attention = eb * T * h / sd                          // norm input
                       + (norm_rebuilt ? 0.0 : lb * T * h / sd) // QKV input
                       + latents                                // MLA latents (replicated)
                       + (qkv_rebuilt ? 0.0 : eb * T * (q_width + k_width + v_width) / t) // Q, K, V
                       + lb * T * context_width / t // projection input (context)
                       + mask_bytes(m, T * h / sd); // attention-output dropout
    const bool keep_scores = !flash_attention && !v.recomputes(RecomputeModule::core_attn);
    const double score_elements = T * heads * s / t; // b·a·s²/(t·cp)
    if (keep_scores)
        attention += eb * score_elements                        // softmax output
                     + mask_bytes(m, score_elements)            // its dropout mask
                     + (m.dropout ? eb * score_elements : 0.0); // dropout output
    else if (flash_attention)
        attention += 4.0 * T * heads / t; // fp32 log-sum-exp per row

    // MLP block: norm input, fc1 input, fc1 output, activation output, dropout mask.
    const double gate = m.activation == core::Activation::swiglu ? 2.0 : 1.0;
    double mlp = eb * T * h / sd + mask_bytes(m, T * h / sd);
    if (m.is_moe_layer(layer)) {
        // The norm's output (the router's and the experts' input) is what a recomputed MoE
        // block keeps; output-discarding layernorm recomputation drops it.
        const bool whole_block = v.recomputes(RecomputeModule::moe);
        if (!v.recomputes(RecomputeModule::layernorm) || whole_block) mlp += eb * T * h / sd;
        if (!whole_block) mlp += moe_block_bytes(m, v, lb);
    } else if (!v.recomputes(RecomputeModule::mlp)) {
        const double f = double(m.ffn_hidden_size);
        mlp += lb * T * h / sd + eb * T * f * gate / t + lb * T * f / t;
    }
    return attention + mlp;
}

double weight_gradient_state_bytes(const core::ModelSpec& m, const LayerView& v,
                                   std::int64_t layer) {
    const double eb = double(core::dtype_bytes(m.precision.params));
    const double lb = linear_input_bytes(v, eb);
    const double t = double(v.tp), sd = v.sequence_parallel ? t : 1.0;
    const double T = double(v.tokens());
    const double h = double(m.hidden_size);
    const double q = double(m.num_attention_heads) * double(m.head_dim);
    const double kv = double(m.num_query_groups) * double(m.head_dim);
    const double gate = m.activation == core::Activation::swiglu ? 2.0 : 1.0;
    // W = doutᵀ · input for each linear layer (Qi et al. 2024 hold both until W): the inputs
    // of the column-parallel GEMMs (QKV, fc1: sharded under sequence parallelism) and of the
    // row-parallel ones (output projection, fc2), and the output gradients — the column-
    // parallel ones split over tp, the row-parallel ones over every row.
    const double attention = lb * T * (h / sd + q / t) + eb * T * ((q + 2 * kv) / t + h);
    if (m.is_moe_layer(layer)) {
        const core::MoeSpec& e = *m.moe;
        const double routed = routed_copies(e, v);
        const double fe = double(e.expert_ffn_hidden_size), et = double(v.etp);
        return attention + eb * T * h / sd + 4.0 * T * double(e.num_experts) / sd  // router
               + lb * routed * (h + fe / et) + eb * routed * (gate * fe / et + h); // experts
    }
    const double f = double(m.ffn_hidden_size);
    return attention + lb * T * (h / sd + f / t) + eb * T * (gate * f / t + h);
}

double backward_working_bytes(const core::ModelSpec& m, const LayerView& v, std::int64_t layer,
                              bool fused) {
    const double eb = double(core::dtype_bytes(m.precision.params));
    const double t = double(v.tp), sd = v.sequence_parallel ? t : 1.0;
    const double T = double(v.tokens()), h = double(m.hidden_size);
    const double gate = m.activation == core::Activation::swiglu ? 2.0 : 1.0;
    double bytes = 0.0;
    if (m.is_moe_layer(layer)) {
        // The experts' output and fc1-output gradients and the router's, before their W.
        const core::MoeSpec& e = *m.moe;
        const double routed = routed_copies(e, v);
        bytes = eb * routed * (h + gate * double(e.expert_ffn_hidden_size) / double(v.etp)) +
                4.0 * T * double(e.num_experts) / sd;
    } else {
        // The MLP's backward makes the gradients of fc2's output (every row, as the tensor-
        // parallel region sees them) and of fc1's while the layer's stored state is whole.
        // Fused, fc2's W frees its gradient and the activation before fc1's gradient appears
        // beside fc1's output; B alone keeps both gradients for W.
        const double f = double(m.ffn_hidden_size) / t;
        bytes = eb * T * (fused ? std::max(h, (gate - 1.0) * f) : h + gate * f);
    }
    // Under recomputation, what the layer's forward rebuilt just before its backward.
    if (v.recompute != core::RecomputeGranularity::none) {
        LayerView all = v;
        all.recompute = core::RecomputeGranularity::none;
        bytes += activation_bytes(m, all, layer) - activation_bytes(m, v, layer);
    }
    return bytes;
}

namespace {

// What the last stage keeps per micro-batch for the loss (and multi-token prediction): until B
// (Korthikanti et al. 2022, §4.3) the final norm's input, the output layer's input and the fp32
// logits the softmax cross-entropy keeps (vocabulary-parallel over tp); between B and W the output
// layer's input and the logits, turned into their gradient in place. `transient`: what the loss
// holds for a moment on top of `stored` — the output layer's 16-bit logits beside the fp32 copy
// the cross-entropy makes of them (Megatron-Core's _VocabParallelCrossEntropy casts with
// .float() while the caller still holds the 16-bit tensor), and again in the backward the
// 16-bit cast of the fp32 logits' gradient beside it.
struct LossBytes {
    double stored = 0.0, weight_state = 0.0, transient = 0.0;
};

LossBytes loss_bytes(const core::JobSpec& job) {
    const core::ModelSpec& m = job.model;
    const core::ParallelPlan& p = job.plan;
    const double eb = double(core::dtype_bytes(m.precision.params));
    const double T = double(LayerView::of(p, job.training.seq_length).tokens());
    const double sd = p.sequence_parallel ? double(p.tp) : 1.0;
    const double norm_output = eb * T * double(m.hidden_size) / sd;
    const double logit_elements = T * double(m.padded_vocab_size(p.tp)) / double(p.tp);
    const double logits = 4.0 * logit_elements;
    // fp32 parameters make fp32 logits: .float() is then the same tensor.
    const double transient = eb < 4.0 ? eb * logit_elements : 0.0;
    const LossBytes head{2.0 * norm_output + logits, norm_output + logits, transient};
    LossBytes out = head;
    // Each multi-token-prediction module keeps, besides its layer's activations, the next
    // tokens' embeddings (enorm's input), the projection's 2h-wide input and a loss of its own.
    for (std::int64_t d = 0; d < m.mtp_num_layers; ++d) {
        const LayerView v = mtp_view(job, LayerView::of(p, job.training.seq_length), d);
        const std::int64_t layer = m.num_layers + d;
        const double eh_input = linear_input_bytes(v, eb) * 2.0 * T * double(m.hidden_size) / sd;
        out.stored += norm_output + eh_input + activation_bytes(m, v, layer) + head.stored;
        out.weight_state += eh_input + weight_gradient_state_bytes(m, v, layer) + head.weight_state;
    }
    return out;
}

// One micro-batch of one model chunk: what it stores until B (its layers, and the loss on the
// last virtual stage), what it holds between B and W, and how much more than its stored bytes
// it holds at the worst moment of its backward.
struct ChunkActivations {
    double stored = 0.0, weight_state = 0.0, backward_extra = 0.0;
};

// One layer's bytes for one micro-batch: stored until B, its backward's working set, W's state.
struct LayerBytes {
    double stored = 0.0, working = 0.0, state = 0.0;
};

// Layers differ only by being MoE or dense and by their recomputation: each kind's bytes are
// computed once (the planner asks for thousands of layouts).
class LayerBytesTable {
public:
    LayerBytesTable(const core::JobSpec& job, bool fused) : job_(job), fused_(fused) {}
    // Layer `layer`, at `position` inside its chunk (what block recomputation goes by).
    const LayerBytes& of(std::int64_t layer, std::int64_t position) {
        const core::RecomputeGranularity rc = job_.recompute_at(position);
        const core::Fp8Recipe fp8 = job_.layer_fp8(layer);
        const int key = (int(rc) * 2 + (job_.model.is_moe_layer(layer) ? 1 : 0)) * 2 +
                        (fp8 != core::Fp8Recipe::none ? 1 : 0);
        LayerBytes& b = kinds_[std::size_t(key)];
        if (!known_[std::size_t(key)]) {
            LayerView v = LayerView::of(job_.plan, job_.training.seq_length);
            v.recompute = rc;
            v.fp8 = fp8;
            b = {activation_bytes(job_.model, v, layer),
                 backward_working_bytes(job_.model, v, layer, fused_),
                 weight_gradient_state_bytes(job_.model, v, layer)};
            known_[std::size_t(key)] = true;
        }
        return b;
    }

private:
    const core::JobSpec& job_;
    bool fused_;
    std::array<LayerBytes, 12> kinds_{};
    std::array<bool, 12> known_{};
};

ChunkActivations chunk_activations(const core::JobSpec& job, const core::PipelineSplit& split,
                                   LayerBytesTable& layers, std::int64_t vs, bool fused_backward) {
    const core::ModelSpec& m = job.model;
    const core::ParallelPlan& p = job.plan;
    const std::int64_t first = split.first_layer(vs), per_chunk = split.layers_of(vs);
    const double eb = double(core::dtype_bytes(m.precision.params));
    const double T = double(LayerView::of(p, job.training.seq_length).tokens());
    const LossBytes loss = vs == p.model_stages() - 1 ? loss_bytes(job) : LossBytes{};
    // W of the embedding: the gradient of its output, every row (the table is split by
    // vocabulary).
    const double embedding_state = vs == 0 ? eb * T * double(m.hidden_size) : 0.0;
    ChunkActivations c;
    for (std::int64_t layer = first; layer < first + per_chunk; ++layer) {
        c.stored += layers.of(layer, layer - first).stored;
        c.weight_state += layers.of(layer, layer - first).state;
    }
    // The backward walks the layers from the last. At layer i the micro-batch holds the layers
    // below i as stored, layer i with its working set, and — B alone — the W state of the
    // layers above i and of the loss; a fused backward has spent those (and freed the loss's
    // buffers after the output layer's W, before the first layer).
    double below = c.stored, above = fused_backward ? 0.0 : loss.weight_state, worst = 0.0;
    for (std::int64_t layer = first + per_chunk; layer-- > first;) {
        const LayerBytes& b = layers.of(layer, layer - first);
        below -= b.stored;
        worst = std::max(worst, below + b.stored + b.working + above);
        if (!fused_backward) above += b.state;
    }
    c.stored += loss.stored;
    // The loss's forward and the start of its backward: every layer's bytes, the loss's, and
    // the 16-bit logits (or their gradient's cast) beside the fp32 ones.
    worst = std::max(worst, c.stored + loss.transient);
    c.weight_state += loss.weight_state + embedding_state;
    if (!fused_backward) worst = std::max(worst, c.weight_state); // B's end: W's inputs only
    c.backward_extra = std::max(0.0, worst - c.stored);
    return c;
}

} // namespace

StageParameters stage_parameters(const core::JobSpec& job, std::int32_t r) {
    // One rank of the stage (tensor and expert rank 0: every rank of a stage holds as many),
    // from the model layout table the executors allocate from.
    StageParameters out;
    for (std::int32_t c = 0; c < job.plan.vpp; ++c) {
        const core::ChunkLayout layout(job, r, c, 0, 0, 1, core::LayoutDetail::counts);
        out.expert += double(layout.expert_parameters());
        out.dense += double(layout.parameters() - layout.expert_parameters());
        out.fp8 += double(layout.fp8_parameters());
        out.units.push_back(layout.units());
    }
    return out;
}

double StageParameters::chunk_total(std::size_t chunk) const {
    double sum = 0.0;
    for (const core::ShardUnit& u : units.at(chunk)) sum += double(u.total());
    return sum;
}

core::ShardUnit StageParameters::largest_unit() const {
    core::ShardUnit largest;
    for (const auto& chunk : units)
        for (const core::ShardUnit& u : chunk)
            if (u.total() > largest.total()) largest = u;
    return largest;
}

namespace {

// A rank's shard of `params` at `bytes` per parameter: dense over the shard ranks, experts over
// the expert shard ranks (Rajbhandari et al. 2020's Ψ/N_d, per component).
double shard_bytes(const StageParameters& params, const core::ParallelPlan& p, double bytes) {
    return bytes * (params.dense / double(p.shard_ranks()) +
                    params.expert / double(p.expert_shard_ranks()));
}

} // namespace

double optimizer_parameters(const StageParameters& params, const core::ParallelPlan& p) {
    if (p.zero_stage() == 0) return params.total();
    return shard_bytes(params, p, 1.0);
}

std::vector<core::InFlight> in_flight_per_rank(const core::Schedule& schedule) {
    std::vector<core::InFlight> out;
    for (std::int32_t r = 0; r < schedule.stages; ++r)
        out.push_back(core::max_in_flight(schedule, r));
    return out;
}

std::vector<StageMemory> memory_per_stage(const core::JobSpec& job,
                                          const core::Schedule& schedule) {
    return memory_per_stage(job, in_flight_per_rank(schedule));
}

double fp8_weight_copy_bytes(double fp8_parameters, const core::Fp8& fp8) {
    if (!fp8.enabled()) return 0.0;
    // The weight and its transpose in the recipe's format: beside the 16-bit weight, or — with
    // the parameter gather — in its place (2 bytes a parameter already counted as weights).
    const double copies = 2.0 * core::quantized_bytes(fp8.recipe);
    return fp8_parameters * (fp8.param_gather ? copies - 2.0 : copies);
}

double gathered_weight_bytes(double parameters, double fp8_parameters, double weight_b,
                             const core::Fp8& fp8) {
    // Under the parameter gather the quantized weights travel in their format (FP8: 1 byte,
    // NVFP4: 0.5 + an E4M3 scale per 16).
    const bool quantized = fp8.enabled() && fp8.param_gather;
    return parameters * weight_b -
           (quantized ? (weight_b - core::quantized_bytes(fp8.recipe)) * fp8_parameters : 0.0);
}

std::vector<StageParameters> parameters_per_stage(const core::JobSpec& job) {
    std::vector<StageParameters> out;
    for (std::int32_t r = 0; r < job.plan.pp; ++r) out.push_back(stage_parameters(job, r));
    return out;
}

void sharded_state(const StageParameters& params, const core::ParallelPlan& p,
                   const core::Precision& prec, StageMemory& s) {
    const double weight_b = double(core::dtype_bytes(prec.params));
    const double grad_b = double(core::dtype_bytes(prec.grads));
    const int zero = p.zero_stage();
    // ZeRO (Rajbhandari et al. 2020, §5): stage 1 shards the optimizer state, 2 the gradients
    // too, 3 the parameters too — 2Ψ + 2Ψ + KΨ/N_d, 2Ψ + (2 + K)Ψ/N_d, (2 + 2 + K)Ψ/N_d.
    s.weights_bytes = zero >= 3
                          ? shard_bytes(params, p, weight_b)
                          : params.total() * weight_b + fp8_weight_copy_bytes(params.fp8, p.fp8);
    s.gradients_bytes = zero >= 2 ? shard_bytes(params, p, grad_b) : params.total() * grad_b;
    s.optimizer_bytes =
        core::optimizer_state_bytes_per_parameter(prec) * optimizer_parameters(params, p);
    s.gathered_bytes = 0.0;
    if (zero < 2) return;
    // What the sharded state gathers back: under ZeRO-3 the unit computing and the units
    // prefetched (with the FP8 weight and transpose cast from each, unless they travel in
    // FP8); under ZeRO-2 and 3 a unit's full gradients while they are made and while the
    // previous unit's are reduce-scattered (Megatron-FSDP's double buffer).
    const core::ShardUnit unit = params.largest_unit();
    const double gathered_units = double(p.sharding.prefetch_units + 1);
    if (zero >= 3)
        s.gathered_bytes =
            gathered_units *
            (gathered_weight_bytes(double(unit.total()), double(unit.fp8), weight_b, p.fp8) +
             fp8_weight_copy_bytes(double(unit.fp8), p.fp8));
    s.gathered_bytes += std::min(2.0, gathered_units) * double(unit.total()) * grad_b;
    // --keep-fp8-transpose-cache: every FP8 weight's transpose (columnwise copy) outlives its
    // unit's gather, from the forward to the backward; the gathered units' are counted above.
    if (zero >= 3 && p.sharding.keep_fp8_transpose_cache && p.fp8.enabled())
        s.gathered_bytes += core::quantized_bytes(p.fp8.recipe) *
                            std::max(0.0, params.fp8 - gathered_units * double(unit.fp8));
}

std::vector<StageMemory> memory_per_stage(const core::JobSpec& job,
                                          const std::vector<core::InFlight>& in_flight,
                                          const std::vector<StageParameters>* parameters) {
    const core::ModelSpec& m = job.model;
    const core::ParallelPlan& p = job.plan;
    const core::Precision& prec = m.precision;
    const double weight_b = double(core::dtype_bytes(prec.params));
    const LayerView v = LayerView::of(p, job.training.seq_length);
    const double T = double(v.tokens());
    const double h = double(m.hidden_size);
    const double sd = p.sequence_parallel ? double(p.tp) : 1.0;

    const double workspace = cublas_workspace_bytes(job);
    const double reserve = allocator_reserve_fraction(job);
    const core::PipelineSplit split = job.pipeline_split();
    LayerBytesTable fused_layers(job, true), split_layers(job, false);
    std::vector<StageMemory> stages(std::size_t(p.pp));
    for (std::int32_t r = 0; r < p.pp; ++r) {
        StageMemory& s = stages[std::size_t(r)];
        StageParameters own;
        const StageParameters& params =
            parameters ? parameters->at(std::size_t(r)) : (own = stage_parameters(job, r));
        // FP8 linears keep an FP8 copy of their weights and its transpose (what the forward and
        // the two backward GEMMs read); with the FP8 parameter gather it replaces the 16-bit one.
        sharded_state(params, p, prec, s);

        // Activations: at each moment that can be this rank's peak, every held (micro-batch,
        // chunk) pair at its chunk's bytes — stored until B, W's state until W — and, while a
        // B runs, what that micro-batch's backward holds on top (one backward at a time).
        const core::InFlight& flight = in_flight.at(std::size_t(r));
        std::vector<ChunkActivations> chunk;
        LayerBytesTable& layers = flight.fused_backward ? fused_layers : split_layers;
        for (std::int64_t c = 0; c < p.vpp; ++c)
            chunk.push_back(chunk_activations(
                job, split, layers, core::virtual_stage(p.schedule, c, std::int32_t(p.pp), r),
                flight.fused_backward));
        s.in_flight = flight.until_backward_input;
        for (const core::HeldPairs& held : flight.peaks) {
            double held_bytes = 0.0;
            for (std::size_t c = 0; c < chunk.size(); ++c)
                held_bytes += double(held.until_backward_input[c]) * chunk[c].stored +
                              double(held.until_backward_weight[c]) * chunk[c].weight_state;
            const double working =
                held.in_backward >= 0 ? chunk[std::size_t(held.in_backward)].backward_extra : 0.0;
            if (held_bytes + working > s.activations_bytes + s.backward_working_bytes) {
                s.activations_bytes = held_bytes;
                s.backward_working_bytes = working;
            }
        }
        // Point-to-point send and receive buffers for activations and gradients, and the
        // all-gathered activation that sequence parallelism materialises for each GEMM.
        // Transformer Engine's cuBLAS workspace, kept from the first GEMM on.
        s.buffers_bytes = (p.pp > 1 ? 4.0 * weight_b * T * h / sd : 0.0) +
                          (p.sequence_parallel ? weight_b * T * h : 0.0) + workspace;
        s.allocator_reserve_bytes = reserve * s.allocated_bytes();
        s.runtime_bytes = runtime_memory(job, r).total();
    }
    return stages;
}

} // namespace trident::simulator
