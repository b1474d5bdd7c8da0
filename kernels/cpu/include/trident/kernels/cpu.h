#pragma once
// CPU kernels of the executor, in the style of llm.c: raw fp32 arrays with explicit sizes,
// row-major, N = tokens (batch · sequence). Forward functions write their outputs; backward
// functions ACCUMULATE (+=) into the gradients they are given, so callers zero them once per
// step and several micro-batches add up. Every kernel has a finite-difference test.
#include <cstddef>
#include <cstdint>
#include <functional>

namespace trident::kernels::cpu {

// Sets the threads of the kernels' own pool, which runs every kernel, the GEMMs cut into blocks
// (OpenBLAS itself then runs single-threaded; one MPI rank per core wants 1).
void set_blas_threads(int threads);
int kernel_threads(); // what set_blas_threads last set (1 before any call)

// Runs body(begin, end) over [0, n) cut into at most kernel_threads() contiguous blocks that
// start at multiples of `grain`, the caller running the first. A body that writes disjoint
// outputs per item gives the one-thread results bit for bit.
using BlockBody = std::function<void(std::int64_t begin, std::int64_t end)>;
void parallel_for(std::int64_t n, std::int64_t grain, const BlockBody& body);

// out[N×OC] = inp[N×C] · weightᵀ (weight is [OC×C], as nn.Linear stores it) + bias[OC].
void matmul_forward(float* out, const float* inp, const float* weight, const float* bias,
                    std::int64_t N, std::int64_t C, std::int64_t OC);
// Input gradient: dinp[N×C] += dout[N×OC] · weight[OC×C].
void matmul_backward_input(float* dinp, const float* dout, const float* weight, std::int64_t N,
                           std::int64_t C, std::int64_t OC);
// Weight gradient: dweight[OC×C] += doutᵀ · inp; dbias[OC] += Σ_n dout (dbias may be null).
void matmul_backward_weight(float* dweight, float* dbias, const float* dout, const float* inp,
                            std::int64_t N, std::int64_t C, std::int64_t OC);

// LayerNorm (Ba et al. 2016) over C, `eps` added to the variance (the model's norm_epsilon);
// saves mean and 1/std per row for the backward.
void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                       const float* bias, std::int64_t N, std::int64_t C, float eps);
void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                        const float* inp, const float* weight, const float* mean, const float* rstd,
                        std::int64_t N, std::int64_t C);
// RMSNorm (Zhang & Sennrich 2019): x / rms(x) · weight.
void rmsnorm_forward(float* out, float* rstd, const float* inp, const float* weight, std::int64_t N,
                     std::int64_t C, float eps);
void rmsnorm_backward(float* dinp, float* dweight, const float* dout, const float* inp,
                      const float* weight, const float* rstd, std::int64_t N, std::int64_t C);

// GeLU, tanh approximation (Hendrycks & Gimpel 2016), elementwise over n values.
void gelu_forward(float* out, const float* inp, std::int64_t n);
void gelu_backward(float* dinp, const float* inp, const float* dout, std::int64_t n);
// SwiGLU (Shazeer 2020): inp is [N×2F] = [gate | up] per row; out[N×F] = silu(gate)·up.
void swiglu_forward(float* out, const float* inp, std::int64_t N, std::int64_t F);
void swiglu_backward(float* dinp, const float* inp, const float* dout, std::int64_t N,
                     std::int64_t F);
// A routed expert's activation scaled row by row by its routing weight (fc2 reads gate[n] ·
// act[n, :], Megatron-Core applying the probabilities inside the activation), backward: given
// d = ∂L/∂(gate · act) in `d_act`, d_gate[n] = Σ_f d[n, f] · act[n, f] and d_act becomes
// gate[n] · d. The sum runs in column order (the same bits at any thread count, and as the
// executor summed before this kernel: MoE routing near ties stay where they were).
void gated_rows_backward(float* d_gate, float* d_act, const float* act, const float* gate,
                         std::int64_t N, std::int64_t F);

// Dropout (Srivastava et al. 2014) whose mask is a pure function of where an element sits: the
// caller gives each row a key (the run's seed mixed with the layer, the site, the sample and
// the token's position — never the rank), and element (row, column) is kept, scaled by
// 1/(1 − p), when splitmix64(row key ⊕ column) falls at or above p of its range. Every layout
// and every recomputation of a layer therefore drops the same elements, and the backward is
// the same operation on the gradient.
std::uint64_t dropout_key(std::uint64_t key, std::uint64_t part); // mixes `part` into `key`
float dropout_factor(std::uint64_t row_key, std::int64_t column, float p); // 0 or 1/(1 − p)
// x[r, c] ·= dropout_factor(row_keys[r], c, p), in place.
void dropout_rows(float* x, std::int64_t rows, std::int64_t cols, const std::uint64_t* row_keys,
                  float p);

// Dropout on the attention probabilities: row_keys[(b·H + h)·Tq + t] is query row t's key of
// head h in sequence b; column s is the key position. Applied between the softmax and the
// product with V; the saved probs stay undropped (the softmax backward needs them).
struct AttentionDropout {
    float probability = 0.0f;
    const std::uint64_t* row_keys = nullptr; // [B×H×Tq]
};

// Causal attention over a fused qkv[B×T×(H + 2·KV)·D] (queries of H heads, then keys and values
// of KV heads; head h reads kv head h / (H/KV), grouped-query attention). out[B×T×H·D];
// probs[B×H×T×T] is kept for the backward.
void attention_forward(float* out, float* probs, const float* qkv, std::int64_t B, std::int64_t T,
                       std::int64_t H, std::int64_t KV, std::int64_t D,
                       const AttentionDropout* dropout = nullptr);
void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* probs,
                        std::int64_t B, std::int64_t T, std::int64_t H, std::int64_t KV,
                        std::int64_t D, const AttentionDropout* dropout = nullptr);
// The general form, for context parallelism: Tq query rows per sequence (row stride q_stride,
// head h at h·D) against Tk key and value rows (stride kv_stride, KV group g at g·D of k and v);
// query t sees keys [0, visible[t]). out and dout rows have stride out_stride; probs is
// [B×H×Tq×Tk]. The backward accumulates into dq, dk, dv (same layouts as q, k, v).
void attention_forward_rows(float* out, std::int64_t out_stride, float* probs, const float* q,
                            std::int64_t q_stride, const float* k, const float* v,
                            std::int64_t kv_stride, const std::int32_t* visible, std::int64_t B,
                            std::int64_t Tq, std::int64_t Tk, std::int64_t H, std::int64_t KV,
                            std::int64_t D, const AttentionDropout* dropout = nullptr);
void attention_backward_rows(float* dq, float* dk, float* dv, const float* dout,
                             std::int64_t out_stride, const float* q, std::int64_t q_stride,
                             const float* k, const float* v, std::int64_t kv_stride,
                             const float* probs, const std::int32_t* visible, std::int64_t B,
                             std::int64_t Tq, std::int64_t Tk, std::int64_t H, std::int64_t KV,
                             std::int64_t D, const AttentionDropout* dropout = nullptr);

// Flash attention (Dao et al. 2022; FlashAttention-2, Dao 2023): the same attention, tiled with
// an online softmax so the scores are never stored; lse[B×H×Tq] (log Σ exp of each query row's
// scaled scores) is saved instead, and the backward recomputes the probabilities from it and
// from the forward's output `out`. Arguments as the unfused forms above.
void flash_attention_forward(float* out, float* lse, const float* qkv, std::int64_t B,
                             std::int64_t T, std::int64_t H, std::int64_t KV, std::int64_t D,
                             const AttentionDropout* dropout = nullptr);
void flash_attention_backward(float* dqkv, const float* dout, const float* out, const float* qkv,
                              const float* lse, std::int64_t B, std::int64_t T, std::int64_t H,
                              std::int64_t KV, std::int64_t D,
                              const AttentionDropout* dropout = nullptr);
void flash_attention_forward_rows(float* out, std::int64_t out_stride, float* lse, const float* q,
                                  std::int64_t q_stride, const float* k, const float* v,
                                  std::int64_t kv_stride, const std::int32_t* visible,
                                  std::int64_t B, std::int64_t Tq, std::int64_t Tk, std::int64_t H,
                                  std::int64_t KV, std::int64_t D,
                                  const AttentionDropout* dropout = nullptr);
void flash_attention_backward_rows(float* dq, float* dk, float* dv, const float* dout,
                                   const float* out, std::int64_t out_stride, const float* q,
                                   std::int64_t q_stride, const float* k, const float* v,
                                   std::int64_t kv_stride, const float* lse,
                                   const std::int32_t* visible, std::int64_t B, std::int64_t Tq,
                                   std::int64_t Tk, std::int64_t H, std::int64_t KV, std::int64_t D,
                                   const AttentionDropout* dropout = nullptr);

// Rotary position embedding (Su et al. 2021, RoFormer), in place, in the "rotate half" layout
// of GPT-NeoX, Llama and Megatron-LM: within each head of D values, element i pairs with
// i + D/2 and the pair turns by angle pos·base^(−2i/D):
//   x'_i = x_i·cos − x_{i+D/2}·sin,   x'_{i+D/2} = x_{i+D/2}·cos + x_i·sin.
// x holds `rows` rows of stride `row_stride`, each with `heads` heads of D at h·D; row r is at
// sequence position positions[r]. The backward turns gradients by the opposite angle (the
// rotation's transpose). D must be even.
void rope_forward(float* x, std::int64_t rows, std::int64_t row_stride, std::int64_t heads,
                  std::int64_t D, const std::int32_t* positions, double base);
void rope_backward(float* dx, std::int64_t rows, std::int64_t row_stride, std::int64_t heads,
                   std::int64_t D, const std::int32_t* positions, double base);

// Vocabulary-parallel embedding: this shard holds rows [vocab_start, vocab_start + V_local) of
// the table; tokens outside it contribute zero (the tensor group sums the shards).
void embedding_forward(float* out, const std::int32_t* tokens, const float* table, std::int64_t N,
                       std::int64_t C, std::int64_t vocab_start, std::int64_t vocab_local);
void embedding_backward(float* dtable, const std::int32_t* tokens, const float* dout,
                        std::int64_t N, std::int64_t C, std::int64_t vocab_start,
                        std::int64_t vocab_local);

// Vocabulary-parallel softmax cross-entropy (Shoeybi et al. 2019): over logits[N×V_local] of
// one shard, the pieces the tensor group reduces between: row maxima, Σ exp(x − max), and the
// target's logit where this shard holds it (else 0).
void cross_entropy_row_max(float* row_max, const float* logits, std::int64_t N, std::int64_t V);
// Replaces each logit by exp(x − max) and writes the row sums (exponentials computed once:
// the backward reuses them).
void cross_entropy_exp(float* logits, float* sum_exp, const float* row_max, std::int64_t N,
                       std::int64_t V);
void cross_entropy_target_logit(float* target_logit, const float* logits,
                                const std::int32_t* targets, std::int64_t N, std::int64_t V,
                                std::int64_t vocab_start);
// Turns the exponentials of cross_entropy_exp into the logits' gradient, in place:
// scale · (exp / reduced sum − onehot).
void cross_entropy_backward(float* exps, const float* sum_exp, const std::int32_t* targets,
                            float scale, std::int64_t N, std::int64_t V, std::int64_t vocab_start);

// AdamW (Loshchilov & Hutter 2019) with bias correction; step t counts from 1. Each gradient is
// taken times grad_scale (the clipping factor: one pass over the gradients fewer than scaling
// them first, with the same products).
void adamw_update(float* params, const float* grads, float* m, float* v, std::int64_t n, float lr,
                  float beta1, float beta2, float eps, float weight_decay, int t, float grad_scale);

// Σ x², accumulated in double over fixed chunks summed in order (the same bits at any thread
// count): the global gradient norm.
double sum_of_squares(const float* x, std::int64_t n);
void fill(float* x, std::int64_t n, float value); // every x = value, over the kernel threads

} // namespace trident::kernels::cpu
