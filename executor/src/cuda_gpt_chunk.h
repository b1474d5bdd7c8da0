#pragma once
// One model chunk of a decoder-only GPT on one GPU: the CUDA backend's counterpart of
// GptChunk (gpt_chunk.h), over the same parameters — it finds its tensors in the same
// ParameterStore by name, so both backends start from the same weights and save the same
// checkpoints. bf16 weights and activations, fp32 statistics and fp32 gradient accumulation
// (the "main gradients" of Megatron's mixed precision, Micikevicius et al. 2018).
//
// Per layer (Shoeybi et al. 2019 tensor parallelism; with sequence parallelism, Korthikanti et
// al. 2022, the norms and residuals hold 1/tp of the rows, all-gathered before the column-
// parallel GEMMs and reduce-scattered after the row-parallel ones instead of all-reduced):
//   ln1 = norm1(x);  q,k,v = ln1·Wqᵀ, ln1·Wkᵀ, ln1·Wvᵀ (+ bias)   — column-parallel over heads
//   q, k = rope(q), rope(k)                                        — with rotary positions
//   att = flash_attention(q, k, v)                                 — causal, GQA
//   x_mid = x + all_reduce(att·Wprojᵀ) + b_proj                    — row-parallel
//   ln2 = norm2(x_mid);  fc = ln2·W1ᵀ;  act = gelu(fc + b1) | swiglu(fc + b1)
//   x_out = x_mid + all_reduce(act·W2ᵀ) + b2
// The three QKV products read row blocks of the one fused QKV weight (rows [Q | K | V], as the
// CPU chunk stores it), so q, k and v land in the separate [tokens × heads × head_dim]
// buffers flash attention reads. B computes input gradients (and the norms' and GeLU's bias
// gradients, which fall out of those kernels); W the linear layers' weight and bias gradients,
// the LM head's and the embeddings'. Full recomputation keeps a layer's input only and runs
// its forward again inside B; "selective" costs nothing extra here: flash attention never
// stores the probabilities (Korthikanti et al. 2022's selective recomputation for free).
#include "cuda_tensor.h"
#include "trident/core/job.h"
#include "trident/core/model_layout.h"
#include "trident/executor/gpt_chunk.h"
#include "trident/executor/nccl_communicator.h"
#include "trident/kernels/cuda/gemm.h"

#include <cuda_bf16.h>
#include <functional>
#include <vector>

namespace trident::executor {

using bf16 = __nv_bfloat16;

// What every chunk of a rank shares: the flat parameter buffers (bf16 weights the kernels
// read, fp32 gradients they accumulate into), cuBLASLt, the allocator, the compute stream and
// the tensor-parallel group (null when tp is 1).
struct CudaChunkContext {
    const bf16* weights = nullptr;
    float* grads = nullptr;
    kernels::cuda::LtGemm* gemm = nullptr;
    kernels::cuda::CachingAllocator* allocator = nullptr;
    cudaStream_t stream = nullptr;
    NcclCommunicator* tensor = nullptr;
};

class CudaGptChunk {
public:
    // Finds this chunk's tensors in `store` (laid out by the CPU GptChunk of the same
    // (pipeline rank, chunk, tensor rank)); throws SpecError for an unsupported shape.
    CudaGptChunk(const core::JobSpec& job, std::int32_t pipeline_rank, std::int32_t chunk,
                 int tp_rank, const ParameterStore& store);

    bool first() const { return first_; }
    bool last() const { return last_; }
    // bf16 elements between stages: [N×h], or this rank's 1/tp of the rows under sequence
    // parallelism.
    std::int64_t hidden_elements() const { return shape_.rows * shape_.hidden; }

    struct Layer {
        CudaTensor<bf16> x_in, ln1, q, k, v, att, x_mid, ln2, fc, act;
        CudaTensor<float> ln1_mean, ln1_rstd, lse, ln2_mean, ln2_rstd;
        CudaTensor<bf16> d_q, d_k, d_v, d_proj_out, d_fc, d_fc2_out; // B → W
    };
    struct Activations {
        CudaTensor<std::int32_t> tokens, targets; // [N] on the device
        CudaTensor<bf16> input;                   // received hidden state (not the first chunk)
        CudaTensor<bf16> output;                  // hidden state to send (not the last chunk)
        std::vector<Layer> layers;
        CudaTensor<bf16> embedding_grad;          // first chunk, B → W
        CudaTensor<bf16> hidden_out, lnf, logits; // last chunk; logits hold dlogits after F
        CudaTensor<float> lnf_mean, lnf_rstd, row_loss;
        CudaTensor<bf16> dinput; // B's result (not the first chunk)
    };

    // The last chunk adds Σ over its rows of the per-token loss to *loss_sum (device fp32) and
    // leaves (softmax − onehot)·grad_scale in place of the logits: the fused classifier.
    void forward(Activations& a, float grad_scale, float* loss_sum,
                 const CudaChunkContext& ctx) const;
    // dout: gradient of the chunk's output (ignored by the last chunk).
    void backward_input(Activations& a, const bf16* dout, const CudaChunkContext& ctx) const;
    // Weight gradients, last layer first; `final_tensor(i)` is called for each store tensor
    // index whose gradient this call completed, when `report_final` (the step's last
    // micro-batch of this chunk), right after the work that completes it is enqueued.
    void backward_weight(Activations& a, const CudaChunkContext& ctx, bool report_final,
                         const std::function<void(std::size_t)>& final_tensor) const;

private:
    struct LayerParams {
        std::int64_t ln1_w = -1, ln1_b = -1, qkv_w = -1, qkv_b = -1, proj_w = -1, proj_b = -1;
        std::int64_t ln2_w = -1, ln2_b = -1, fc_w = -1, fc_b = -1, fc2_w = -1, fc2_b = -1;
        std::vector<std::size_t> tensors; // indices in the store
    };
    // Fills L from input x and writes the layer's output to *x_out; with x_out null (full
    // recomputation inside B) it stops once everything B needs is saved.
    void layer_forward(const LayerParams& lp, Layer& L, const bf16* x, CudaTensor<bf16>* x_out,
                       const CudaChunkContext& ctx) const;
    void norm_forward(bf16* sum, bf16* out, float* mean, float* rstd, const bf16* x,
                      const bf16* residual, std::int64_t w, std::int64_t b,
                      const CudaChunkContext& ctx) const;
    void norm_backward(bf16* dsum, const bf16* dout, const bf16* dsum_in, const bf16* sum,
                       const float* mean, const float* rstd, std::int64_t w, std::int64_t b,
                       const CudaChunkContext& ctx) const;
    void tp_sum(bf16* data, std::int64_t n, const CudaChunkContext& ctx) const;
    // Sequence parallelism (Korthikanti et al. 2022): entering a tensor-parallel region, this
    // rank's rows → all rows (an all-gather; without SP, `local` itself); leaving it, every
    // rank's partial sums over all rows → the sum over this rank's rows (a reduce-scatter;
    // without SP, an all-reduce in place). all_rows always gathers into a new tensor.
    CudaTensor<bf16> all_rows(const bf16* local, const CudaChunkContext& ctx) const;
    CudaTensor<bf16> gather_rows(CudaTensor<bf16> local, const CudaChunkContext& ctx) const;
    CudaTensor<bf16> reduce_rows(CudaTensor<bf16> partial, const CudaChunkContext& ctx) const;
    template <typename T>
    CudaTensor<T> tensor(std::int64_t n, const CudaChunkContext& ctx) const {
        return CudaTensor<T>(*ctx.allocator, n, ctx.stream);
    }

    bool first_ = false, last_ = false, layernorm_ = true, swiglu_ = false, bias_ = true;
    bool rope_ = false, sp_ = false;
    float norm_eps_ = 1e-5f; // the model's norm_epsilon
    double rotary_base_ = 10000.0;
    core::ChunkShape shape_; // this rank's sizes: tokens, rows, local heads, vocabulary, …
    std::int64_t wte_ = -1, wpe_ = -1, lnf_w_ = -1, lnf_b_ = -1, head_ = -1;
    std::vector<std::size_t> embedding_tensors_, head_tensors_; // store indices, for W's report
    std::vector<LayerParams> layers_;
    std::vector<core::RecomputeGranularity> recompute_;
};

} // namespace trident::executor
