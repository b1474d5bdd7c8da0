#include "cuda_gpt_chunk.h"

#include "trident/core/internal_error.h"
#include "trident/core/model_layout.h"
#include "trident/core/spec_error.h"
#include "trident/kernels/cuda/activation.h"
#include "trident/kernels/cuda/cross_entropy.h"
#include "trident/kernels/cuda/elementwise.h"
#include "trident/kernels/cuda/embedding.h"
#include "trident/kernels/cuda/error.h"
#include "trident/kernels/cuda/flash_attention.h"
#include "trident/kernels/cuda/norm.h"
#include "trident/kernels/cuda/rope.h"

#include <algorithm>
#include <map>
#include <string>

namespace trident::executor {

namespace kc = kernels::cuda;

CudaGptChunk::CudaGptChunk(const core::JobSpec& job, std::int32_t pipeline_rank, std::int32_t chunk,
                           int tp_rank, const ParameterStore& store) {
    const core::ModelSpec& m = job.model;
    const core::ParallelPlan& plan = job.plan;
    shape_ = core::ChunkShape::of(job, pipeline_rank, chunk, tp_rank, 0);
    layernorm_ = m.normalization == core::Normalization::layernorm;
    rope_ = m.position_embedding == core::PositionEmbedding::rope;
    rotary_base_ = m.rotary_base;
    norm_eps_ = float(m.norm_epsilon);
    swiglu_ = m.activation == core::Activation::swiglu;
    bias_ = m.linear_bias;
    sp_ = plan.sequence_parallel && plan.tp > 1;
    const kc::AttentionShape attention{shape_.micro_batch, shape_.local_sequence,
                                       shape_.local_heads, shape_.local_kv_groups,
                                       shape_.head_dim,    0.0f};
    try {
        kc::check_attention_shape(attention);
    } catch (const std::invalid_argument& e) {
        throw core::SpecError("model",
                              std::string("the CUDA backend's flash attention: ") + e.what());
    }
    // The CPU chunks of this rank added their tensors chunk by chunk in layout order: this
    // chunk's start after the earlier chunks' tables.
    std::size_t first_tensor = 0;
    for (std::int32_t c = 0; c < chunk; ++c)
        first_tensor += core::ChunkLayout(job, pipeline_rank, c, tp_rank, 0).tensors().size();
    const core::ChunkLayout layout(job, pipeline_rank, chunk, tp_rank, 0);
    if (first_tensor + layout.tensors().size() > store.tensors.size())
        throw core::InternalError("the CUDA chunk's tensors are not in the parameter store");
    first_ = layout.shape().first;
    last_ = layout.shape().last;
    // Offset of a tensor in the flat buffer (-1: this model has none), its store index
    // recorded in `into` for W's report.
    const auto at = [&](std::vector<std::size_t>& into, core::TensorRole role,
                        std::int64_t layer = -1) {
        const std::int64_t i = layout.find(role, layer);
        if (i < 0) return std::int64_t(-1);
        into.push_back(first_tensor + std::size_t(i));
        return store.tensors[into.back()].offset;
    };
    using R = core::TensorRole;
    if (first_) {
        wte_ = at(embedding_tensors_, R::word_embedding);
        wpe_ = at(embedding_tensors_, R::position_embedding);
    }
    const std::int64_t first_layer = layout.shape().first_layer;
    for (std::int64_t layer = first_layer; layer < first_layer + layout.shape().layers; ++layer) {
        LayerParams lp;
        auto& ts = lp.tensors;
        lp.ln1_w = at(ts, R::norm1_weight, layer);
        lp.ln1_b = at(ts, R::norm1_bias, layer);
        lp.qkv_w = at(ts, R::qkv_weight, layer);
        lp.qkv_b = at(ts, R::qkv_bias, layer);
        lp.proj_w = at(ts, R::proj_weight, layer);
        lp.proj_b = at(ts, R::proj_bias, layer);
        lp.ln2_w = at(ts, R::norm2_weight, layer);
        lp.ln2_b = at(ts, R::norm2_bias, layer);
        lp.fc_w = at(ts, R::fc1_weight, layer);
        lp.fc_b = at(ts, R::fc1_bias, layer);
        lp.fc2_w = at(ts, R::fc2_weight, layer);
        lp.fc2_b = at(ts, R::fc2_bias, layer);
        layers_.push_back(std::move(lp));
        recompute_.push_back(job.recompute_at(layer - first_layer));
    }
    if (last_) {
        lnf_w_ = at(head_tensors_, R::final_norm_weight);
        lnf_b_ = at(head_tensors_, R::final_norm_bias);
        // Tied on one chunk holding both ends: the embedding, reported after its own backward.
        head_ = m.tied_embeddings && first_ ? wte_ : at(head_tensors_, R::output_weight);
    }
}

void CudaGptChunk::tp_sum(bf16* data, std::int64_t n, const CudaChunkContext& ctx) const {
    if (ctx.tensor && ctx.tensor->size() > 1)
        ctx.tensor->all_reduce(data, std::size_t(n), ncclBfloat16, ncclSum);
}

CudaTensor<bf16> CudaGptChunk::all_rows(const bf16* local, const CudaChunkContext& ctx) const {
    CudaTensor<bf16> all = tensor<bf16>(shape_.tokens * shape_.hidden, ctx);
    ctx.tensor->all_gather_typed(local, all.get(), std::size_t(shape_.rows * shape_.hidden),
                                 ncclBfloat16);
    return all;
}

CudaTensor<bf16> CudaGptChunk::gather_rows(CudaTensor<bf16> local,
                                           const CudaChunkContext& ctx) const {
    if (!sp_) return local;
    return all_rows(local.get(), ctx);
}

CudaTensor<bf16> CudaGptChunk::reduce_rows(CudaTensor<bf16> partial,
                                           const CudaChunkContext& ctx) const {
    if (!sp_) {
        tp_sum(partial.get(), shape_.tokens * shape_.hidden, ctx);
        return partial;
    }
    CudaTensor<bf16> mine = tensor<bf16>(shape_.rows * shape_.hidden, ctx);
    ctx.tensor->reduce_scatter_typed(partial.get(), mine.get(),
                                     std::size_t(shape_.rows * shape_.hidden), ncclBfloat16);
    return mine;
}

void CudaGptChunk::norm_forward(bf16* sum, bf16* out, float* mean, float* rstd, const bf16* x,
                                const bf16* residual, std::int64_t w, std::int64_t b,
                                const CudaChunkContext& ctx) const {
    if (layernorm_)
        kc::residual_layernorm_forward<bf16>(sum, out, mean, rstd, x, residual, ctx.weights + w,
                                             ctx.weights + b, shape_.rows, shape_.hidden, norm_eps_,
                                             ctx.stream);
    else
        kc::residual_rmsnorm_forward<bf16>(sum, out, rstd, x, residual, ctx.weights + w,
                                           shape_.rows, shape_.hidden, norm_eps_, ctx.stream);
}

void CudaGptChunk::norm_backward(bf16* dsum, const bf16* dout, const bf16* dsum_in, const bf16* sum,
                                 const float* mean, const float* rstd, std::int64_t w,
                                 std::int64_t b, const CudaChunkContext& ctx) const {
    if (layernorm_)
        kc::residual_layernorm_backward<bf16>(dsum, ctx.grads + w, ctx.grads + b, dout, dsum_in,
                                              sum, ctx.weights + w, mean, rstd, shape_.rows,
                                              shape_.hidden, ctx.stream);
    else
        kc::residual_rmsnorm_backward<bf16>(dsum, ctx.grads + w, dout, dsum_in, sum,
                                            ctx.weights + w, rstd, shape_.rows, shape_.hidden,
                                            ctx.stream);
}

void CudaGptChunk::layer_forward(const LayerParams& lp, Layer& L, const bf16* x,
                                 CudaTensor<bf16>* x_out, const CudaChunkContext& ctx) const {
    const bf16* W = ctx.weights;
    kc::LtGemm& gemm = *ctx.gemm;
    const cudaStream_t s = ctx.stream;
    const std::int64_t NH = shape_.tokens * shape_.hidden, NLH = shape_.rows * shape_.hidden,
                       q_cols = shape_.local_heads * shape_.head_dim,
                       kv_cols = shape_.local_kv_groups * shape_.head_dim;
    const std::int64_t gate = swiglu_ ? 2 : 1;
    // Attention block. norm1 has no residual to add: its "sum" is x itself (aliased). x holds
    // this rank's rows; the GEMMs and attention see all N rows.
    CudaTensor<bf16> normed = tensor<bf16>(NLH, ctx);
    L.ln1_mean = tensor<float>(shape_.rows, ctx);
    L.ln1_rstd = tensor<float>(shape_.rows, ctx);
    norm_forward(const_cast<bf16*>(x), normed.get(), L.ln1_mean.get(), L.ln1_rstd.get(), x, nullptr,
                 lp.ln1_w, lp.ln1_b, ctx);
    L.ln1 = gather_rows(std::move(normed), ctx);
    L.q = tensor<bf16>(shape_.tokens * q_cols, ctx);
    L.k = tensor<bf16>(shape_.tokens * kv_cols, ctx);
    L.v = tensor<bf16>(shape_.tokens * kv_cols, ctx);
    const bf16* wq = W + lp.qkv_w;
    const bf16* wk = wq + q_cols * shape_.hidden;
    const bf16* wv = wk + kv_cols * shape_.hidden;
    gemm.forward<bf16>(L.q.get(), L.ln1.get(), wq, shape_.tokens, shape_.hidden, q_cols, 1.0f, 0.0f,
                       s);
    gemm.forward<bf16>(L.k.get(), L.ln1.get(), wk, shape_.tokens, shape_.hidden, kv_cols, 1.0f,
                       0.0f, s);
    gemm.forward<bf16>(L.v.get(), L.ln1.get(), wv, shape_.tokens, shape_.hidden, kv_cols, 1.0f,
                       0.0f, s);
    if (bias_) {
        kc::add_bias<bf16>(L.q.get(), W + lp.qkv_b, shape_.tokens, q_cols, s);
        kc::add_bias<bf16>(L.k.get(), W + lp.qkv_b + q_cols, shape_.tokens, kv_cols, s);
        kc::add_bias<bf16>(L.v.get(), W + lp.qkv_b + q_cols + kv_cols, shape_.tokens, kv_cols, s);
    }
    if (rope_) { // queries and keys turn by their positions; values do not
        kc::rope_forward<bf16>(L.q.get(), shape_.tokens, q_cols, shape_.local_heads,
                               shape_.head_dim, shape_.local_sequence, rotary_base_, s);
        kc::rope_forward<bf16>(L.k.get(), shape_.tokens, kv_cols, shape_.local_kv_groups,
                               shape_.head_dim, shape_.local_sequence, rotary_base_, s);
    }
    const kc::AttentionShape shape{shape_.micro_batch, shape_.local_sequence,
                                   shape_.local_heads, shape_.local_kv_groups,
                                   shape_.head_dim,    0.0f};
    L.att = tensor<bf16>(shape_.tokens * q_cols, ctx);
    L.lse = tensor<float>(shape_.micro_batch * shape_.local_heads * shape_.local_sequence, ctx);
    kc::flash_attention_forward(L.att.get(), L.lse.get(), L.q.get(), L.k.get(), L.v.get(), shape,
                                s);
    CudaTensor<bf16> y = tensor<bf16>(NH, ctx);
    gemm.forward<bf16>(y.get(), L.att.get(), W + lp.proj_w, shape_.tokens, q_cols, shape_.hidden,
                       1.0f, 0.0f, s);
    y = reduce_rows(std::move(y), ctx); // row-parallel: the partial products add up
    if (bias_) kc::add_bias<bf16>(y.get(), W + lp.proj_b, shape_.rows, shape_.hidden, s);
    // MLP block: norm2 adds the residual (x_mid = x + y) and normalises it in one pass.
    L.x_mid = tensor<bf16>(NLH, ctx);
    normed = tensor<bf16>(NLH, ctx);
    L.ln2_mean = tensor<float>(shape_.rows, ctx);
    L.ln2_rstd = tensor<float>(shape_.rows, ctx);
    norm_forward(L.x_mid.get(), normed.get(), L.ln2_mean.get(), L.ln2_rstd.get(), y.get(), x,
                 lp.ln2_w, lp.ln2_b, ctx);
    L.ln2 = gather_rows(std::move(normed), ctx);
    L.fc = tensor<bf16>(shape_.tokens * gate * shape_.local_ffn, ctx);
    gemm.forward<bf16>(L.fc.get(), L.ln2.get(), W + lp.fc_w, shape_.tokens, shape_.hidden,
                       gate * shape_.local_ffn, 1.0f, 0.0f, s);
    L.act = tensor<bf16>(shape_.tokens * shape_.local_ffn, ctx);
    if (swiglu_) {
        if (bias_)
            kc::add_bias<bf16>(L.fc.get(), W + lp.fc_b, shape_.tokens, gate * shape_.local_ffn, s);
        kc::swiglu_forward<bf16>(L.act.get(), L.fc.get(), shape_.tokens, shape_.local_ffn, s);
    } else {
        kc::bias_gelu_forward<bf16>(L.act.get(), L.fc.get(), bias_ ? W + lp.fc_b : nullptr,
                                    shape_.tokens, shape_.local_ffn, s);
    }
    if (!x_out) return; // recomputation inside B: everything B needs is saved
    y = tensor<bf16>(NH, ctx);
    gemm.forward<bf16>(y.get(), L.act.get(), W + lp.fc2_w, shape_.tokens, shape_.local_ffn,
                       shape_.hidden, 1.0f, 0.0f, s);
    y = reduce_rows(std::move(y), ctx);
    if (bias_) kc::add_bias<bf16>(y.get(), W + lp.fc2_b, shape_.rows, shape_.hidden, s);
    *x_out = tensor<bf16>(NLH, ctx);
    kc::add<bf16>(x_out->get(), L.x_mid.get(), y.get(), NLH, s);
}

void CudaGptChunk::forward(Activations& a, float grad_scale, float* loss_sum,
                           const CudaChunkContext& ctx) const {
    const cudaStream_t s = ctx.stream;
    const std::int64_t NH = shape_.tokens * shape_.hidden, NLH = shape_.rows * shape_.hidden;
    CudaTensor<bf16> x;
    if (first_) {
        // Vocabulary-parallel lookup: each shard fills its rows, the tensor group sums them
        // (into this rank's rows under sequence parallelism).
        x = tensor<bf16>(NH, ctx);
        kc::embedding_forward<bf16>(x.get(), ctx.weights + wte_, a.tokens.get(), shape_.tokens,
                                    shape_.local_vocab, shape_.vocab_start, shape_.hidden, s);
        x = reduce_rows(std::move(x), ctx);
        if (wpe_ >= 0)
            kc::add_position_embedding<bf16>(x.get(), ctx.weights + wpe_, shape_.rows,
                                             shape_.first_row, shape_.local_sequence, shape_.hidden,
                                             s);
    } else {
        x = std::move(a.input);
    }
    a.layers.clear();
    a.layers.resize(layers_.size());
    for (std::size_t i = 0; i < layers_.size(); ++i) {
        Layer& L = a.layers[i];
        L.x_in = std::move(x);
        layer_forward(layers_[i], L, L.x_in.get(), &x, ctx);
        if (recompute_[i] == core::RecomputeGranularity::full) {
            CudaTensor<bf16> input = std::move(L.x_in);
            L = Layer{};
            L.x_in = std::move(input); // only the layer's input stays until B
        }
    }
    if (!last_) {
        a.output = std::move(x);
        return;
    }
    a.hidden_out = std::move(x);
    CudaTensor<bf16> normed = tensor<bf16>(NLH, ctx);
    a.lnf_mean = tensor<float>(shape_.rows, ctx);
    a.lnf_rstd = tensor<float>(shape_.rows, ctx);
    // No residual here: the norm's sum output is its input (aliased).
    norm_forward(a.hidden_out.get(), normed.get(), a.lnf_mean.get(), a.lnf_rstd.get(),
                 a.hidden_out.get(), nullptr, lnf_w_, lnf_b_, ctx);
    a.lnf = gather_rows(std::move(normed), ctx); // the LM head sees every row
    a.logits = tensor<bf16>(shape_.tokens * shape_.local_vocab, ctx);
    ctx.gemm->forward<bf16>(a.logits.get(), a.lnf.get(), ctx.weights + head_, shape_.tokens,
                            shape_.hidden, shape_.local_vocab, 1.0f, 0.0f, s);
    a.row_loss = tensor<float>(shape_.tokens, ctx);
    const bool sharded = ctx.tensor && ctx.tensor->size() > 1;
    if (!sharded) {
        kc::cross_entropy_forward_backward<bf16>(a.row_loss.get(), a.logits.get(), a.targets.get(),
                                                 shape_.tokens, shape_.local_vocab, grad_scale, s);
    } else {
        // Padding rows of the vocabulary are not classes: they get no probability.
        kc::fill_columns<bf16>(a.logits.get(), shape_.tokens, shape_.local_vocab,
                               std::max<std::int64_t>(0, shape_.vocab - shape_.vocab_start), -1e30f,
                               s);
        CudaTensor<float> local_max = tensor<float>(shape_.tokens, ctx),
                          global_max = tensor<float>(shape_.tokens, ctx);
        CudaTensor<float> sumexp = tensor<float>(shape_.tokens, ctx),
                          target = tensor<float>(shape_.tokens, ctx);
        kc::cross_entropy_partials<bf16>(local_max.get(), sumexp.get(), target.get(),
                                         a.logits.get(), a.targets.get(), shape_.tokens,
                                         shape_.local_vocab, shape_.vocab_start, s);
        TRIDENT_CUDA_CHECK(cudaMemcpyAsync(global_max.get(), local_max.get(),
                                           std::size_t(shape_.tokens) * sizeof(float),
                                           cudaMemcpyDeviceToDevice, s));
        ctx.tensor->all_reduce(global_max.get(), std::size_t(shape_.tokens), ncclFloat32, ncclMax);
        kc::cross_entropy_rescale_sumexp(sumexp.get(), local_max.get(), global_max.get(),
                                         shape_.tokens, s);
        ctx.tensor->all_reduce(sumexp.get(), std::size_t(shape_.tokens), ncclFloat32, ncclSum);
        ctx.tensor->all_reduce(target.get(), std::size_t(shape_.tokens), ncclFloat32, ncclSum);
        kc::cross_entropy_loss_and_grad<bf16>(
            a.row_loss.get(), a.logits.get(), a.targets.get(), global_max.get(), sumexp.get(),
            target.get(), shape_.tokens, shape_.local_vocab, shape_.vocab_start, grad_scale, s);
    }
    kc::accumulate_sum(loss_sum, a.row_loss.get(), shape_.tokens, s);
}

void CudaGptChunk::backward_input(Activations& a, const bf16* dout,
                                  const CudaChunkContext& ctx) const {
    const cudaStream_t s = ctx.stream;
    const bf16* W = ctx.weights;
    kc::LtGemm& gemm = *ctx.gemm;
    const std::int64_t NH = shape_.tokens * shape_.hidden, NLH = shape_.rows * shape_.hidden,
                       q_cols = shape_.local_heads * shape_.head_dim,
                       kv_cols = shape_.local_kv_groups * shape_.head_dim;
    const std::int64_t gate = swiglu_ ? 2 : 1;
    CudaTensor<bf16> dx = tensor<bf16>(NLH, ctx); // the gradient of this rank's rows
    if (last_) {
        // The forward left (softmax − onehot)·scale in the logits: the LM head's input grad.
        CudaTensor<bf16> dlnf = tensor<bf16>(NH, ctx);
        gemm.dgrad<bf16>(dlnf.get(), a.logits.get(), W + head_, shape_.tokens, shape_.hidden,
                         shape_.local_vocab, 1.0f, 0.0f, s);
        dlnf = reduce_rows(std::move(dlnf), ctx); // the LM head is column-parallel
        norm_backward(dx.get(), dlnf.get(), nullptr, a.hidden_out.get(), a.lnf_mean.get(),
                      a.lnf_rstd.get(), lnf_w_, lnf_b_, ctx);
        a.hidden_out.reset();
        a.lnf_mean.reset();
        a.lnf_rstd.reset();
        a.row_loss.reset();
    } else {
        TRIDENT_CUDA_CHECK(cudaMemcpyAsync(dx.get(), dout, std::size_t(NLH) * sizeof(bf16),
                                           cudaMemcpyDeviceToDevice, s));
    }
    for (std::size_t i = layers_.size(); i-- > 0;) {
        const LayerParams& lp = layers_[i];
        Layer& L = a.layers[i];
        if (recompute_[i] == core::RecomputeGranularity::full) {
            layer_forward(lp, L, L.x_in.get(), nullptr, ctx); // the forward again, from x_in
        }
        // MLP: x_out = x_mid + fc2(act(fc1(norm2(x_mid)))). Under sequence parallelism the
        // output gradient of fc2 is every rank's rows, gathered (and kept for W).
        CudaTensor<bf16> dx_all = sp_ ? all_rows(dx.get(), ctx) : CudaTensor<bf16>{};
        const bf16* d_fc2_out = sp_ ? dx_all.get() : dx.get();
        CudaTensor<bf16> d_act = tensor<bf16>(shape_.tokens * shape_.local_ffn, ctx);
        gemm.dgrad<bf16>(d_act.get(), d_fc2_out, W + lp.fc2_w, shape_.tokens, shape_.local_ffn,
                         shape_.hidden, 1.0f, 0.0f, s);
        L.d_fc = tensor<bf16>(shape_.tokens * gate * shape_.local_ffn, ctx);
        if (swiglu_)
            kc::swiglu_backward<bf16>(L.d_fc.get(), d_act.get(), L.fc.get(), shape_.tokens,
                                      shape_.local_ffn, s);
        else
            kc::bias_gelu_backward<bf16>(L.d_fc.get(), bias_ ? ctx.grads + lp.fc_b : nullptr,
                                         d_act.get(), L.fc.get(), bias_ ? W + lp.fc_b : nullptr,
                                         shape_.tokens, shape_.local_ffn, s);
        d_act.reset();
        CudaTensor<bf16> d_ln2 = tensor<bf16>(NH, ctx);
        gemm.dgrad<bf16>(d_ln2.get(), L.d_fc.get(), W + lp.fc_w, shape_.tokens, shape_.hidden,
                         gate * shape_.local_ffn, 1.0f, 0.0f, s);
        d_ln2 = reduce_rows(std::move(d_ln2), ctx); // column-parallel input gradient
        // d(x_mid) = the residual's gradient + the norm's.
        CudaTensor<bf16> d_mid = tensor<bf16>(NLH, ctx);
        norm_backward(d_mid.get(), d_ln2.get(), dx.get(), L.x_mid.get(), L.ln2_mean.get(),
                      L.ln2_rstd.get(), lp.ln2_w, lp.ln2_b, ctx);
        d_ln2.reset();
        L.d_fc2_out = sp_ ? std::move(dx_all) : std::move(dx);
        dx.reset();
        // Attention: x_mid = x_in + proj(attention(qkv(norm1(x_in)))).
        CudaTensor<bf16> d_mid_all = sp_ ? all_rows(d_mid.get(), ctx) : CudaTensor<bf16>{};
        const bf16* d_proj_out = sp_ ? d_mid_all.get() : d_mid.get();
        CudaTensor<bf16> d_att = tensor<bf16>(shape_.tokens * q_cols, ctx);
        gemm.dgrad<bf16>(d_att.get(), d_proj_out, W + lp.proj_w, shape_.tokens, q_cols,
                         shape_.hidden, 1.0f, 0.0f, s);
        const kc::AttentionShape shape{shape_.micro_batch, shape_.local_sequence,
                                       shape_.local_heads, shape_.local_kv_groups,
                                       shape_.head_dim,    0.0f};
        CudaTensor<float> workspace =
            tensor<float>(std::int64_t(kc::flash_attention_backward_workspace_floats(shape)), ctx);
        L.d_q = tensor<bf16>(shape_.tokens * q_cols, ctx);
        L.d_k = tensor<bf16>(shape_.tokens * kv_cols, ctx);
        L.d_v = tensor<bf16>(shape_.tokens * kv_cols, ctx);
        kc::flash_attention_backward(L.d_q.get(), L.d_k.get(), L.d_v.get(), d_att.get(), L.q.get(),
                                     L.k.get(), L.v.get(), L.att.get(), L.lse.get(),
                                     workspace.get(), shape, s);
        d_att.reset();
        workspace.reset();
        if (rope_) { // back through the rotation, before the QKV GEMMs' gradients
            kc::rope_backward<bf16>(L.d_q.get(), shape_.tokens, q_cols, shape_.local_heads,
                                    shape_.head_dim, shape_.local_sequence, rotary_base_, s);
            kc::rope_backward<bf16>(L.d_k.get(), shape_.tokens, kv_cols, shape_.local_kv_groups,
                                    shape_.head_dim, shape_.local_sequence, rotary_base_, s);
        }
        const bf16* wq = W + lp.qkv_w;
        const bf16* wk = wq + q_cols * shape_.hidden;
        const bf16* wv = wk + kv_cols * shape_.hidden;
        // d(ln1) sums three products: accumulate them in fp32, round to bf16 once.
        CudaTensor<bf16> d_ln1 = tensor<bf16>(NH, ctx);
        {
            CudaTensor<float> sum = tensor<float>(NH, ctx);
            gemm.dgrad<float>(sum.get(), L.d_q.get(), wq, shape_.tokens, shape_.hidden, q_cols,
                              1.0f, 0.0f, s);
            gemm.dgrad<float>(sum.get(), L.d_k.get(), wk, shape_.tokens, shape_.hidden, kv_cols,
                              1.0f, 1.0f, s);
            gemm.dgrad<float>(sum.get(), L.d_v.get(), wv, shape_.tokens, shape_.hidden, kv_cols,
                              1.0f, 1.0f, s);
            kc::convert<bf16, float>(d_ln1.get(), sum.get(), NH, s);
        }
        d_ln1 = reduce_rows(std::move(d_ln1), ctx);
        dx = tensor<bf16>(NLH, ctx);
        norm_backward(dx.get(), d_ln1.get(), d_mid.get(), L.x_in.get(), L.ln1_mean.get(),
                      L.ln1_rstd.get(), lp.ln1_w, lp.ln1_b, ctx);
        L.d_proj_out = sp_ ? std::move(d_mid_all) : std::move(d_mid);
        // What only B needed goes now; W keeps the linear layers' inputs and output grads.
        for (CudaTensor<bf16>* t : {&L.x_in, &L.q, &L.k, &L.v, &L.x_mid}) t->reset();
        for (CudaTensor<float>* t : {&L.ln1_mean, &L.ln1_rstd, &L.lse, &L.ln2_mean, &L.ln2_rstd})
            t->reset();
        L.fc.reset();
    }
    // The embedding's weight gradient needs every row (the table is split by vocabulary).
    if (first_)
        a.embedding_grad = gather_rows(std::move(dx), ctx);
    else
        a.dinput = std::move(dx);
}

void CudaGptChunk::backward_weight(Activations& a, const CudaChunkContext& ctx, bool report_final,
                                   const std::function<void(std::size_t)>& final_tensor) const {
    const cudaStream_t s = ctx.stream;
    float* G = ctx.grads;
    kc::LtGemm& gemm = *ctx.gemm;
    const std::int64_t q_cols = shape_.local_heads * shape_.head_dim,
                       kv_cols = shape_.local_kv_groups * shape_.head_dim, gate = swiglu_ ? 2 : 1;
    const auto report = [&](const std::vector<std::size_t>& tensors) {
        if (report_final)
            for (std::size_t t : tensors) final_tensor(t);
    };
    // The main gradients accumulate in fp32 across micro-batches (beta = 1).
    if (last_) {
        gemm.wgrad<float>(G + head_, a.logits.get(), a.lnf.get(), shape_.tokens, shape_.hidden,
                          shape_.local_vocab, 1.0f, 1.0f, s);
        a.logits.reset();
        a.lnf.reset();
        report(head_tensors_);
    }
    for (std::size_t i = layers_.size(); i-- > 0;) {
        const LayerParams& lp = layers_[i];
        Layer& L = a.layers[i];
        float* gq = G + lp.qkv_w;
        gemm.wgrad<float>(gq, L.d_q.get(), L.ln1.get(), shape_.tokens, shape_.hidden, q_cols, 1.0f,
                          1.0f, s);
        gemm.wgrad<float>(gq + q_cols * shape_.hidden, L.d_k.get(), L.ln1.get(), shape_.tokens,
                          shape_.hidden, kv_cols, 1.0f, 1.0f, s);
        gemm.wgrad<float>(gq + (q_cols + kv_cols) * shape_.hidden, L.d_v.get(), L.ln1.get(),
                          shape_.tokens, shape_.hidden, kv_cols, 1.0f, 1.0f, s);
        gemm.wgrad<float>(G + lp.proj_w, L.d_proj_out.get(), L.att.get(), shape_.tokens, q_cols,
                          shape_.hidden, 1.0f, 1.0f, s);
        gemm.wgrad<float>(G + lp.fc_w, L.d_fc.get(), L.ln2.get(), shape_.tokens, shape_.hidden,
                          gate * shape_.local_ffn, 1.0f, 1.0f, s);
        gemm.wgrad<float>(G + lp.fc2_w, L.d_fc2_out.get(), L.act.get(), shape_.tokens,
                          shape_.local_ffn, shape_.hidden, 1.0f, 1.0f, s);
        if (bias_) {
            kc::bias_gradient<bf16>(G + lp.qkv_b, L.d_q.get(), shape_.tokens, q_cols, s);
            kc::bias_gradient<bf16>(G + lp.qkv_b + q_cols, L.d_k.get(), shape_.tokens, kv_cols, s);
            kc::bias_gradient<bf16>(G + lp.qkv_b + q_cols + kv_cols, L.d_v.get(), shape_.tokens,
                                    kv_cols, s);
            kc::bias_gradient<bf16>(G + lp.proj_b, L.d_proj_out.get(), shape_.tokens, shape_.hidden,
                                    s);
            if (swiglu_)
                kc::bias_gradient<bf16>(G + lp.fc_b, L.d_fc.get(), shape_.tokens,
                                        gate * shape_.local_ffn, s);
            kc::bias_gradient<bf16>(G + lp.fc2_b, L.d_fc2_out.get(), shape_.tokens, shape_.hidden,
                                    s);
        }
        L = Layer{};
        report(lp.tensors);
    }
    if (first_) {
        kc::embedding_backward<bf16>(G + wte_, a.embedding_grad.get(), a.tokens.get(),
                                     shape_.tokens, shape_.local_vocab, shape_.vocab_start,
                                     shape_.hidden, s);
        if (wpe_ >= 0)
            kc::position_embedding_backward<bf16>(G + wpe_, a.embedding_grad.get(), shape_.tokens,
                                                  shape_.local_sequence, shape_.hidden, s);
        a.embedding_grad.reset();
        report(embedding_tensors_);
    }
}

} // namespace trident::executor
