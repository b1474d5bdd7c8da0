// Benchmark of trident::kernels_cuda on the visible GPU. Prints one table:
//   memory-bound kernels: achieved GB/s (fewest bytes each must move, read + written) against
//     the measured device-to-device cudaMemcpy rate (bytes read + written, target ≥ 80 %);
//   GEMMs (cuBLASLt, bf16 in, fp32 accumulate) at GPT-1.3B shapes (hidden 2048, 8192 tokens):
//     TFLOP/s against the bf16 dense datasheet peak (989 TFLOP/s for H100/H200 SXM; pass
//     --peak-tflops to change it);
//   causal flash attention forward/backward: TFLOP/s, FLOPs counted as FlashAttention does.
// Each row is the median of 10 timed launches (CUDA events) after 3 warm-ups, on tensors
// several times the L2 cache. `--attention-tsv FILE` also writes the attention rows for
// tests/gpu/sdpa_reference.py to print beside PyTorch.
#include "trident/kernels/cuda/activation.h"
#include "trident/kernels/cuda/adamw.h"
#include "trident/kernels/cuda/cross_entropy.h"
#include "trident/kernels/cuda/device_buffer.h"
#include "trident/kernels/cuda/embedding.h"
#include "trident/kernels/cuda/flash_attention.h"
#include "trident/kernels/cuda/gemm.h"
#include "trident/kernels/cuda/norm.h"
#include "trident/kernels/cuda/stream.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <vector>

using namespace trident::kernels::cuda;
using bf16 = __nv_bfloat16;

namespace {

struct Row {
    std::string kernel, shape;
    double ms;
    double rate;      // GB/s or TFLOP/s
    std::string unit; // "GB/s" or "TFLOP/s"
    double percent;   // of the ceiling named in `of`
    std::string of;
};

// Median milliseconds of one call of `fn` on `stream`.
double time_ms(const std::function<void()>& fn, cudaStream_t stream, int warmup = 3,
               int reps = 10) {
    for (int i = 0; i < warmup; ++i) fn();
    std::vector<double> ms;
    Event start, stop;
    for (int i = 0; i < reps; ++i) {
        start.record(stream);
        fn();
        stop.record(stream);
        stop.synchronize();
        ms.push_back(stop.elapsed_ms_since(start));
    }
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
}

// Fills a buffer with N(0, scale) values (never zeros: they run faster than real data). At most
// 4 Mi values are drawn on the host; larger buffers repeat them (device-to-device copies).
template <typename T>
void fill_random(DeviceBuffer<T>& buf, unsigned seed, float scale = 1.0f) {
    const std::size_t drawn = std::min<std::size_t>(buf.size(), std::size_t{1} << 22);
    std::mt19937 gen(seed);
    std::normal_distribution<float> dist(0.0f, scale);
    std::vector<T> host(drawn);
    for (auto& x : host) {
        if constexpr (std::is_same_v<T, float>)
            x = dist(gen);
        else
            x = __float2bfloat16(dist(gen));
    }
    TRIDENT_CUDA_CHECK(
        cudaMemcpy(buf.get(), host.data(), drawn * sizeof(T), cudaMemcpyHostToDevice));
    for (std::size_t done = drawn; done < buf.size();) {
        const std::size_t n = std::min(done, buf.size() - done);
        TRIDENT_CUDA_CHECK(
            cudaMemcpy(buf.get() + done, buf.get(), n * sizeof(T), cudaMemcpyDeviceToDevice));
        done += n;
    }
}

std::string dims(std::initializer_list<long long> d) {
    std::string s;
    for (long long x : d) s += (s.empty() ? "" : "x") + std::to_string(x);
    return s;
}

} // namespace

int main(int argc, char** argv) {
    double peak_tflops = 989.0;
    std::string attention_tsv;
    for (int i = 1; i < argc; ++i) {
        if (!std::strcmp(argv[i], "--peak-tflops") && i + 1 < argc)
            peak_tflops = std::atof(argv[++i]);
        if (!std::strcmp(argv[i], "--attention-tsv") && i + 1 < argc) attention_tsv = argv[++i];
    }
    if (visible_device_count() == 0) {
        std::printf("cuda_kernels_bench: no CUDA device visible; nothing measured\n");
        return 0;
    }
    cudaDeviceProp prop{};
    TRIDENT_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    Stream stream;
    const cudaStream_t s = stream.get();
    std::vector<Row> rows;

    // --- ceiling: device-to-device copy ---------------------------------------------------
    const std::size_t copy_bytes = std::size_t{2} << 30;
    double copy_gbs = 0.0;
    {
        DeviceBuffer<std::byte> a(copy_bytes), b(copy_bytes);
        a.fill_bytes(0x3C);
        const double ms = time_ms(
            [&] {
                TRIDENT_CUDA_CHECK(
                    cudaMemcpyAsync(b.get(), a.get(), copy_bytes, cudaMemcpyDeviceToDevice, s));
            },
            s);
        copy_gbs = 2.0 * copy_bytes / (ms * 1e6);
        rows.push_back({"cudaMemcpy D2D (ceiling)", "2 GiB", ms, copy_gbs, "GB/s", 100.0, "copy"});
    }
    auto add_bw = [&](const std::string& name, const std::string& shape, double bytes,
                      const std::function<void()>& fn) {
        const double ms = time_ms(fn, s);
        const double gbs = bytes / (ms * 1e6);
        rows.push_back({name, shape, ms, gbs, "GB/s", 100.0 * gbs / copy_gbs, "copy"});
    };

    // --- norms: tokens 32768 × hidden 2048 (128 MiB per bf16 tensor) ---------------------
    {
        const long long N = 32768, C = 2048;
        DeviceBuffer<bf16> x(N * C), r(N * C), sum(N * C), out(N * C), dout(N * C), dsum(N * C);
        DeviceBuffer<bf16> gamma(C), beta(C);
        DeviceBuffer<float> mean(N), rstd(N), dgamma(C), dbeta(C);
        for (auto* b : {&x, &r, &dout}) fill_random(*b, 1);
        fill_random(gamma, 2);
        fill_random(beta, 3);
        const double bytes = 4.0 * N * C * sizeof(bf16);
        const std::string shape = dims({N, C});
        add_bw("residual+LayerNorm fwd", shape, bytes, [&] {
            residual_layernorm_forward<bf16>(sum.get(), out.get(), mean.get(), rstd.get(), x.get(),
                                             r.get(), gamma.get(), beta.get(), N, C, 1e-5f, s);
        });
        add_bw("residual+LayerNorm bwd", shape, bytes, [&] {
            residual_layernorm_backward<bf16>(dsum.get(), dgamma.get(), dbeta.get(), dout.get(),
                                              r.get(), sum.get(), gamma.get(), mean.get(),
                                              rstd.get(), N, C, s);
        });
        add_bw("residual+RMSNorm fwd", shape, bytes, [&] {
            residual_rmsnorm_forward<bf16>(sum.get(), out.get(), rstd.get(), x.get(), r.get(),
                                           gamma.get(), N, C, 1e-5f, s);
        });
        add_bw("residual+RMSNorm bwd", shape, bytes, [&] {
            residual_rmsnorm_backward<bf16>(dsum.get(), dgamma.get(), dout.get(), r.get(),
                                            sum.get(), gamma.get(), rstd.get(), N, C, s);
        });
    }
    // --- activations: tokens 16384 × ffn 8192 ---------------------------------------------
    {
        const long long N = 16384, F = 8192;
        DeviceBuffer<bf16> in(N * 2 * F), out(N * 2 * F), dout(N * F), din(N * 2 * F), bias(F);
        DeviceBuffer<float> dbias(F);
        fill_random(in, 4);
        fill_random(dout, 5);
        fill_random(bias, 6);
        const double e = static_cast<double>(N) * F * sizeof(bf16);
        add_bw("bias+GeLU fwd", dims({N, F}), 2 * e,
               [&] { bias_gelu_forward<bf16>(out.get(), in.get(), bias.get(), N, F, s); });
        add_bw("bias+GeLU bwd (+dbias)", dims({N, F}), 3 * e, [&] {
            bias_gelu_backward<bf16>(din.get(), dbias.get(), dout.get(), in.get(), bias.get(), N, F,
                                     s);
        });
        add_bw("SwiGLU fwd", dims({N, 2 * F}), 3 * e,
               [&] { swiglu_forward<bf16>(out.get(), in.get(), N, F, s); });
        add_bw("SwiGLU bwd", dims({N, 2 * F}), 5 * e,
               [&] { swiglu_backward<bf16>(din.get(), dout.get(), in.get(), N, F, s); });
    }
    // --- cross-entropy: 8192 tokens × vocab 50304 -----------------------------------------
    {
        const long long N = 8192, V = 50304;
        DeviceBuffer<bf16> logits(N * V);
        fill_random(logits, 7, 2.0f);
        std::vector<std::int32_t> host_targets(N);
        for (long long i = 0; i < N; ++i)
            host_targets[i] = static_cast<std::int32_t>((i * 7919) % V);
        DeviceBuffer<std::int32_t> targets(host_targets);
        DeviceBuffer<float> loss(N), mx(N), se(N), tl(N);
        const double e = static_cast<double>(N) * V * sizeof(bf16);
        add_bw("cross-entropy partials (shard)", dims({N, V}), e, [&] {
            cross_entropy_partials<bf16>(mx.get(), se.get(), tl.get(), logits.get(), targets.get(),
                                         N, V, 0, s);
        });
        add_bw("cross-entropy loss+grad (shard)", dims({N, V}), 2 * e, [&] {
            cross_entropy_loss_and_grad<bf16>(loss.get(), logits.get(), targets.get(), mx.get(),
                                              se.get(), tl.get(), N, V, 0, 1.0f / N, s);
        });
        fill_random(logits, 7, 2.0f);
        add_bw("cross-entropy fused fwd+bwd", dims({N, V}), 2 * e, [&] {
            cross_entropy_forward_backward<bf16>(loss.get(), logits.get(), targets.get(), N, V,
                                                 1.0f / N, s);
        });
    }
    // --- AdamW and gradient norm: 200 tensors, 100 M parameters ----------------------------
    {
        const long long per = 500000, count = 200, P = per * count;
        DeviceBuffer<float> p(P), g(P), m(P), v(P);
        DeviceBuffer<bf16> copy(P);
        fill_random(p, 8);
        fill_random(g, 9, 0.01f);
        fill_random(m, 10, 0.001f);
        v.fill_bytes(0);
        std::vector<AdamWTensor> tensors;
        std::vector<GradientView> views;
        for (long long i = 0; i < count; ++i) {
            tensors.push_back({p.get() + i * per, g.get() + i * per, m.get() + i * per,
                               v.get() + i * per, copy.get() + i * per, per});
            views.push_back({g.get() + i * per, per});
        }
        AdamWConfig cfg;
        add_bw("AdamW (fp32 master, bf16 copy)", "200 tensors, 100M", 30.0 * P,
               [&] { adamw_step(tensors, cfg, s); });
        DeviceBuffer<float> norm(1);
        add_bw("gradient squared norm", "200 tensors, 100M", 4.0 * P,
               [&] { gradient_squared_norm(norm.get(), views, s); });
    }
    // --- embedding: 32768 tokens × 2048, vocab 50304 ---------------------------------------
    {
        const long long N = 32768, C = 2048, V = 50304;
        DeviceBuffer<bf16> table(V * C), out(N * C), dout(N * C);
        DeviceBuffer<float> dtable(V * C);
        fill_random(table, 11);
        fill_random(dout, 12);
        dtable.fill_bytes(0);
        std::vector<std::int32_t> host_ids(N);
        std::mt19937 gen(13);
        for (auto& id : host_ids) id = static_cast<std::int32_t>(gen() % V);
        DeviceBuffer<std::int32_t> ids(host_ids);
        add_bw("embedding fwd", dims({N, C}), 2.0 * N * C * sizeof(bf16),
               [&] { embedding_forward<bf16>(out.get(), table.get(), ids.get(), N, V, 0, C, s); });
        add_bw("embedding bwd (fp32 atomics)", dims({N, C}), N * C * (2.0 + 8.0), [&] {
            embedding_backward<bf16>(dtable.get(), dout.get(), ids.get(), N, V, 0, C, s);
        });
    }
    // --- GEMMs ------------------------------------------------------------------------------
    {
        LtGemm gemm;
        auto add_gemm = [&](const std::string& name, long long N, long long C, long long OC,
                            int layout) {
            DeviceBuffer<bf16> x(N * C), w(OC * C), dy(N * OC), y(N * OC), dx(N * C);
            DeviceBuffer<float> dw(OC * C);
            fill_random(x, 14);
            fill_random(w, 15, 0.02f);
            fill_random(dy, 16);
            dw.fill_bytes(0);
            const double flops = 2.0 * N * C * OC;
            const char* what[] = {"fwd", "dgrad", "wgrad fp32+="};
            const double ms = time_ms(
                [&] {
                    if (layout == 0)
                        gemm.forward(y.get(), x.get(), w.get(), N, C, OC, 1.0f, 0.0f, s);
                    if (layout == 1)
                        gemm.dgrad(dx.get(), dy.get(), w.get(), N, C, OC, 1.0f, 0.0f, s);
                    if (layout == 2)
                        gemm.wgrad(dw.get(), dy.get(), x.get(), N, C, OC, 1.0f, 1.0f, s);
                },
                s);
            const double tflops = flops / (ms * 1e9);
            rows.push_back({"GEMM " + name + " " + what[layout], dims({N, C, OC}), ms, tflops,
                            "TFLOP/s", 100.0 * tflops / peak_tflops, "bf16 peak"});
        };
        add_gemm("8192^3", 8192, 8192, 8192, 0);
        const long long T = 8192, Hd = 2048;
        for (int layout = 0; layout < 3; ++layout) {
            add_gemm("qkv", T, Hd, 3 * Hd, layout);
            add_gemm("attn-out", T, Hd, Hd, layout);
            add_gemm("fc1", T, Hd, 4 * Hd, layout);
            add_gemm("fc2", T, 4 * Hd, Hd, layout);
        }
    }
    // --- flash attention ---------------------------------------------------------------------
    std::vector<std::string> tsv;
    {
        const AttentionShape shapes[] = {
            {4, 2048, 32, 32, 64, 0.0f}, {8, 2048, 16, 16, 128, 0.0f}, {4, 2048, 32, 8, 128, 0.0f}};
        for (const auto& a : shapes) {
            const long long nq = a.batch * a.seq * a.heads * a.head_dim;
            const long long nkv = a.batch * a.seq * a.kv_heads * a.head_dim;
            DeviceBuffer<bf16> q(nq), k(nkv), v(nkv), out(nq), dout(nq), dq(nq), dk(nkv), dv(nkv);
            DeviceBuffer<float> lse(a.batch * a.heads * a.seq);
            DeviceBuffer<float> ws(flash_attention_backward_workspace_floats(a));
            fill_random(q, 17);
            fill_random(k, 18);
            fill_random(v, 19);
            fill_random(dout, 20);
            const std::string shape = "b" + std::to_string(a.batch) + " h" +
                                      std::to_string(a.heads) + " kv" + std::to_string(a.kv_heads) +
                                      " t" + std::to_string(a.seq) + " d" +
                                      std::to_string(a.head_dim);
            AttentionShape a64 = a; // the forward with 64-row blocks, for comparing
            a64.forward_block_rows = 64;
            const auto forward64 = [&] {
                flash_attention_forward(out.get(), lse.get(), q.get(), k.get(), v.get(), a64, s);
            };
            const double fwd64_ms = time_ms(forward64, s);
            const double fwd_ms = time_ms(
                [&] {
                    flash_attention_forward(out.get(), lse.get(), q.get(), k.get(), v.get(), a, s);
                },
                s);
            const double bwd_ms = time_ms(
                [&] {
                    flash_attention_backward(dq.get(), dk.get(), dv.get(), dout.get(), q.get(),
                                             k.get(), v.get(), out.get(), lse.get(), ws.get(), a,
                                             s);
                },
                s);
            const double fwd_tf = flash_attention_forward_flops(a) / (fwd_ms * 1e9);
            const double bwd_tf = flash_attention_backward_flops(a) / (bwd_ms * 1e9);
            rows.push_back({"flash attention fwd (causal)", shape, fwd_ms, fwd_tf, "TFLOP/s",
                            100.0 * fwd_tf / peak_tflops, "bf16 peak"});
            rows.push_back({"flash attention bwd (causal)", shape, bwd_ms, bwd_tf, "TFLOP/s",
                            100.0 * bwd_tf / peak_tflops, "bf16 peak"});
            const double fwd64_tf = flash_attention_forward_flops(a) / (fwd64_ms * 1e9);
            rows.push_back({"  fwd with 64-row blocks", shape, fwd64_ms, fwd64_tf, "TFLOP/s",
                            100.0 * fwd64_tf / peak_tflops, "bf16 peak"});
            char line[256];
            std::snprintf(line, sizeof line, "%lld\t%lld\t%lld\t%lld\t%lld\t%.4f\t%.4f\t%.1f\t%.1f",
                          (long long)a.batch, (long long)a.heads, (long long)a.kv_heads,
                          (long long)a.seq, (long long)a.head_dim, fwd_ms, bwd_ms, fwd_tf, bwd_tf);
            tsv.emplace_back(line);
        }
    }
    TRIDENT_CUDA_CHECK(cudaDeviceSynchronize());

    std::printf(
        "\nTrident CUDA kernels on %s (%d SMs, %.0f MiB), bf16 storage, fp32 accumulation\n",
        prop.name, prop.multiProcessorCount, prop.totalGlobalMem / 1048576.0);
    std::printf("%-34s %-20s %10s %12s %-8s %8s  %s\n", "kernel", "shape", "ms", "rate", "unit",
                "%", "of");
    for (const auto& r : rows)
        std::printf("%-34s %-20s %10.4f %12.1f %-8s %7.1f%%  %s\n", r.kernel.c_str(),
                    r.shape.c_str(), r.ms, r.rate, r.unit.c_str(), r.percent, r.of.c_str());
    std::printf("ceilings: copy %.0f GB/s measured; bf16 dense peak %.0f TFLOP/s (datasheet)\n",
                copy_gbs, peak_tflops);
    if (!attention_tsv.empty()) {
        std::ofstream f(attention_tsv);
        f << "batch\theads\tkv_heads\tseq\thead_dim\tfwd_ms\tbwd_ms\tfwd_tflops\tbwd_tflops\n";
        for (const auto& line : tsv) f << line << "\n";
    }
    return 0;
}
