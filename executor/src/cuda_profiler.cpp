#include "trident/executor/cuda_profiler.h"

#include "trident/core/model_spec.h"
#include "trident/core/spec_error.h"
#include "trident/executor/nccl_communicator.h"
#include "trident/kernels/cuda/activation.h"
#include "trident/kernels/cuda/adamw.h"
#include "trident/kernels/cuda/cross_entropy.h"
#include "trident/kernels/cuda/device_buffer.h"
#include "trident/kernels/cuda/flash_attention.h"
#include "trident/kernels/cuda/gemm.h"
#include "trident/kernels/cuda/norm.h"
#include "trident/kernels/cuda/stream.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <nccl.h>
#include <unistd.h>
#include <vector>

namespace trident::executor {
namespace {

namespace kc = kernels::cuda;
using bf16 = __nv_bfloat16;
using Bytes = kc::DeviceBuffer<std::byte>;

// Median seconds of one call of `run` on `stream` (CUDA events), after one warm-up call;
// at least 3 and at most 20 launches, stopping once ~30 ms have been timed.
template <typename F>
double time_on_stream(F&& run, cudaStream_t stream) {
    run();
    kc::Event start, stop;
    std::vector<double> seconds;
    double total = 0.0;
    while (seconds.size() < 20 && (seconds.size() < 3 || total < 0.03)) {
        start.record(stream);
        run();
        stop.record(stream);
        stop.synchronize();
        seconds.push_back(stop.elapsed_ms_since(start) * 1e-3);
        total += seconds.back();
    }
    std::sort(seconds.begin(), seconds.end());
    return seconds[seconds.size() / 2];
}

// Inputs drawn from a small range so bf16 arithmetic neither overflows nor idles on zeros.
void fill(void* p, std::size_t bytes, cudaStream_t stream) {
    TRIDENT_CUDA_CHECK(cudaMemsetAsync(p, 0x3c, bytes, stream)); // bf16 0x3c3c ≈ 0.0115
}

template <typename T>
T* as(const Bytes& b) {
    return reinterpret_cast<T*>(b.get());
}

std::vector<GemmTiming> measure_gemm(const std::vector<std::int64_t>& sizes, cudaStream_t s,
                                     const std::function<void(double)>& progress) {
    const std::int64_t big = sizes.back();
    const std::size_t elems = std::size_t(big * big);
    Bytes a(elems * 2), b(elems * 2), c(elems * 4);
    fill(a.get(), a.size(), s);
    fill(b.get(), b.size(), s);
    fill(c.get(), c.size(), s);
    kc::LtGemm gemm;
    std::vector<GemmTiming> rows;
    const std::size_t total = sizes.size() * sizes.size() * sizes.size();
    for (std::int64_t m : sizes)
        for (std::int64_t n : sizes)
            for (std::int64_t k : sizes) {
                // C[m×n] = A[m×k]·B[k×n] in the three layouts of a linear layer, averaged as the
                // CPU profiler does (the cost model times all three passes from one table):
                // forward (tokens m, in k, out n), dgrad (tokens m, in n, out k) and wgrad into
                // an fp32 main gradient (out m, in n, tokens k).
                const double f = time_on_stream(
                    [&] {
                        gemm.forward<bf16>(as<bf16>(c), as<bf16>(a), as<bf16>(b), m, k, n, 1.0f,
                                           0.0f, s);
                    },
                    s);
                const double d = time_on_stream(
                    [&] {
                        gemm.dgrad<bf16>(as<bf16>(c), as<bf16>(a), as<bf16>(b), m, n, k, 1.0f, 0.0f,
                                         s);
                    },
                    s);
                const double w = time_on_stream(
                    [&] {
                        gemm.wgrad<float>(as<float>(c), as<bf16>(a), as<bf16>(b), k, n, m, 1.0f,
                                          1.0f, s);
                    },
                    s);
                rows.push_back({m, n, k, (f + d + w) / 3.0});
                progress(double(rows.size()) / double(total));
            }
    return rows;
}

std::vector<AttentionTiming> measure_attention(const std::vector<std::int64_t>& batch_heads,
                                               const std::vector<std::int64_t>& seqs,
                                               cudaStream_t s) {
    std::vector<AttentionTiming> rows;
    for (std::int64_t d : {64, 128})
        for (std::int64_t bh : batch_heads)
            for (std::int64_t t : seqs) {
                // batch·heads sequences of one head each, as the simulator's table is keyed.
                kc::AttentionShape shape{
                    .batch = bh, .seq = t, .heads = 1, .kv_heads = 1, .head_dim = d};
                const std::size_t n = std::size_t(bh * t * d) * 2;
                Bytes q(n), k(n), v(n), out(n), dout(n), dq(n), dk(n), dv(n);
                Bytes lse(std::size_t(bh * t) * 4);
                Bytes work(kc::flash_attention_backward_workspace_floats(shape) * 4);
                for (const Bytes* x : {&q, &k, &v, &dout}) fill(x->get(), x->size(), s);
                const double f = time_on_stream(
                    [&] {
                        kc::flash_attention_forward(as<bf16>(out), as<float>(lse), as<bf16>(q),
                                                    as<bf16>(k), as<bf16>(v), shape, s);
                    },
                    s);
                const double b = time_on_stream(
                    [&] {
                        kc::flash_attention_backward(as<bf16>(dq), as<bf16>(dk), as<bf16>(dv),
                                                     as<bf16>(dout), as<bf16>(q), as<bf16>(k),
                                                     as<bf16>(v), as<bf16>(out), as<float>(lse),
                                                     as<float>(work), shape, s);
                    },
                    s);
                rows.push_back({bh, t, d, f, b});
            }
    return rows;
}

// Each kernel's forward at a range of sizes; bytes = the fewest it must move (bf16 storage),
// the same count the simulator's layer operations look up. The backward passes are looked up
// in the same tables by their own byte counts.
std::map<std::string, std::vector<MemoryTiming>>
measure_memory_bound(const std::vector<double>& sizes, cudaStream_t s) {
    std::map<std::string, std::vector<MemoryTiming>> tables;
    const auto table =
        [&](const char* name, double bytes_per_element, std::int64_t cols,
            const std::function<void(std::int64_t rows, const Bytes& in, const Bytes& out)>& run) {
            for (double bytes : sizes) {
                const std::int64_t rows =
                    std::max<std::int64_t>(1, std::int64_t(bytes / bytes_per_element) / cols);
                const double moved = double(rows * cols) * bytes_per_element;
                // Input and output regions: 4× the elements in fp32 covers every kernel below.
                Bytes in(std::size_t(rows * cols) * 16), out(std::size_t(rows * cols) * 16);
                fill(in.get(), in.size(), s);
                // Zeroed: the cross-entropy targets live in `out` behind the losses (0 is valid).
                TRIDENT_CUDA_CHECK(cudaMemsetAsync(out.get(), 0, out.size(), s));
                tables[name].push_back({moved, time_on_stream([&] { run(rows, in, out); }, s)});
            }
        };
    table("layernorm", 8.0, 4096, [&](std::int64_t r, const Bytes& in, const Bytes& out) {
        const std::size_t n = std::size_t(r) * 4096;
        kc::residual_layernorm_forward<bf16>(as<bf16>(out), as<bf16>(out) + n, as<float>(out) + n,
                                             as<float>(out) + n + r, as<bf16>(in), as<bf16>(in) + n,
                                             as<bf16>(in) + 2 * n, as<bf16>(in) + 2 * n + 4096, r,
                                             4096, float(core::ModelSpec{}.norm_epsilon), s);
    });
    table("rmsnorm", 8.0, 4096, [&](std::int64_t r, const Bytes& in, const Bytes& out) {
        const std::size_t n = std::size_t(r) * 4096;
        kc::residual_rmsnorm_forward<bf16>(as<bf16>(out), as<bf16>(out) + n, as<float>(out) + n,
                                           as<bf16>(in), as<bf16>(in) + n, as<bf16>(in) + 2 * n, r,
                                           4096, float(core::ModelSpec{}.norm_epsilon), s);
    });
    table("gelu", 4.0, 8192, [&](std::int64_t r, const Bytes& in, const Bytes& out) {
        kc::bias_gelu_forward<bf16>(as<bf16>(out), as<bf16>(in),
                                    as<bf16>(in) + std::size_t(r) * 8192, r, 8192, s);
    });
    // SwiGLU reads the gate and up halves (2 × ffn) and writes ffn: 6 bytes per output.
    table("swiglu", 6.0, 8192, [&](std::int64_t r, const Bytes& in, const Bytes& out) {
        kc::swiglu_forward<bf16>(as<bf16>(out), as<bf16>(in), r, 8192, s);
    });
    // Fused loss and gradient over an unsharded 32768-entry vocabulary: reads the logits and
    // writes the gradient in place (4 bytes per logit), as the simulator counts it.
    table("softmax_cross_entropy", 4.0, 32768,
          [&](std::int64_t r, const Bytes& in, const Bytes& out) {
              kc::cross_entropy_forward_backward<bf16>(
                  as<float>(out), as<bf16>(in), as<std::int32_t>(out) + r, r, 32768, 1.0f, s);
          });
    // AdamW on fp32 master weights: param, m and v read and written, the gradient read.
    table("adamw", 28.0, 1024, [&](std::int64_t r, const Bytes& in, const Bytes& out) {
        const std::size_t n = std::size_t(r) * 1024;
        const kc::AdamWTensor t{.param = as<float>(out),
                                .grad = as<float>(in),
                                .exp_avg = as<float>(out) + n,
                                .exp_avg_sq = as<float>(out) + 2 * n,
                                .numel = std::int64_t(n)};
        kc::adamw_step(std::span(&t, 1), kc::AdamWConfig{}, s);
    });
    table("elementwise", 4.0, 1024, [&](std::int64_t r, const Bytes& in, const Bytes& out) {
        TRIDENT_CUDA_CHECK(cudaMemcpyAsync(out.get(), in.get(), std::size_t(r) * 1024 * 2,
                                           cudaMemcpyDeviceToDevice, s));
    });
    return tables;
}

// Device-to-device copy rate, bytes read + written per second.
double copy_rate(std::size_t bytes, cudaStream_t s) {
    Bytes a(bytes), b(bytes);
    fill(a.get(), bytes, s);
    const double t = time_on_stream(
        [&] {
            TRIDENT_CUDA_CHECK(
                cudaMemcpyAsync(b.get(), a.get(), bytes, cudaMemcpyDeviceToDevice, s));
        },
        s);
    return 2.0 * double(bytes) / t;
}

void check_nccl(ncclResult_t status, const char* call) {
    if (status != ncclSuccess) throw NcclError(call, ncclGetErrorString(status));
}

// One communicator per device of the first `g` visible GPUs (ncclCommInitAll), destroyed with
// the clique.
struct NcclClique {
    explicit NcclClique(int g) : comms(static_cast<std::size_t>(g)) {
        std::vector<int> ids(static_cast<std::size_t>(g));
        for (int i = 0; i < g; ++i) ids[std::size_t(i)] = i;
        check_nccl(ncclCommInitAll(comms.data(), g, ids.data()), "ncclCommInitAll");
    }
    ~NcclClique() {
        for (ncclComm_t comm : comms)
            if (comm) ncclCommDestroy(comm);
    }
    NcclClique(const NcclClique&) = delete;
    NcclClique& operator=(const NcclClique&) = delete;
    std::vector<ncclComm_t> comms;
};

// NCCL collectives among the first `g` visible GPUs, driven from this process (one
// communicator per device from ncclCommInitAll). Host-timed: launch all, wait for all.
std::vector<CollectiveTiming> measure_collectives(int devices, const std::vector<double>& sizes,
                                                  const std::function<void(double)>& progress) {
    std::vector<int> groups;
    for (int g = 2; g <= devices; g *= 2) groups.push_back(g);
    if (groups.empty() || groups.back() != devices) groups.push_back(devices);
    std::vector<CollectiveTiming> rows;
    std::size_t done = 0, total = 0;
    for (int g : groups) total += collective_sweep(sizes, g).size();
    for (int g : groups) {
        const NcclClique clique(g);
        const std::vector<ncclComm_t>& comms = clique.comms;
        struct PerDevice {
            kc::Stream stream;
            Bytes send, recv;
        };
        std::vector<PerDevice> dev;
        const std::size_t largest = std::size_t(sizes.back());
        for (int i = 0; i < g; ++i) {
            TRIDENT_CUDA_CHECK(cudaSetDevice(i));
            dev.push_back({kc::Stream(), Bytes(largest + 4096), Bytes(largest + 4096)});
        }
        const auto timed = [&](const std::function<void(int i)>& op) {
            const auto once = [&] {
                check_nccl(ncclGroupStart(), "ncclGroupStart");
                for (int i = 0; i < g; ++i) op(i);
                check_nccl(ncclGroupEnd(), "ncclGroupEnd");
                for (auto& d : dev) d.stream.synchronize();
            };
            once();
            std::vector<double> t;
            for (int r = 0; r < 10; ++r) {
                const auto start = std::chrono::steady_clock::now();
                once();
                t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
                                .count());
            }
            std::sort(t.begin(), t.end());
            return t[t.size() / 2];
        };
        const auto send = [&](int i) { return as<float>(dev[std::size_t(i)].send); };
        const auto recv = [&](int i) { return as<float>(dev[std::size_t(i)].recv); };
        const auto st = [&](int i) { return dev[std::size_t(i)].stream.get(); };
        const auto c = [&](int i) { return comms[std::size_t(i)]; };
        const std::vector<SweepPoint> points = collective_sweep(sizes, g);
        const auto measured = run_collective_sweep(points, [&](const SweepPoint& p) {
            const std::size_t n = p.count;
            const double seconds = timed([&](int i) {
                switch (p.collective) {
                case core::Collective::all_reduce:
                    check_nccl(
                        ncclAllReduce(send(i), recv(i), n, ncclFloat32, ncclSum, c(i), st(i)),
                        "ncclAllReduce");
                    break;
                case core::Collective::all_gather:
                    check_nccl(ncclAllGather(send(i), recv(i), n, ncclFloat32, c(i), st(i)),
                               "ncclAllGather");
                    break;
                case core::Collective::reduce_scatter:
                    check_nccl(
                        ncclReduceScatter(send(i), recv(i), n, ncclFloat32, ncclSum, c(i), st(i)),
                        "ncclReduceScatter");
                    break;
                case core::Collective::all_to_all:
                    for (int q = 0; q < g; ++q) {
                        check_nccl(
                            ncclSend(send(i) + std::size_t(q) * n, n, ncclFloat32, q, c(i), st(i)),
                            "ncclSend");
                        check_nccl(
                            ncclRecv(recv(i) + std::size_t(q) * n, n, ncclFloat32, q, c(i), st(i)),
                            "ncclRecv");
                    }
                    break;
                case core::Collective::broadcast:
                    check_nccl(ncclBroadcast(send(i), recv(i), n, ncclFloat32, 0, c(i), st(i)),
                               "ncclBroadcast");
                    break;
                case core::Collective::send_recv:
                    if (i == 0)
                        check_nccl(ncclSend(send(0), n, ncclFloat32, 1, c(0), st(0)), "ncclSend");
                    else
                        check_nccl(ncclRecv(recv(1), n, ncclFloat32, 0, c(1), st(1)), "ncclRecv");
                    break;
                }
            });
            progress(double(++done) / double(total));
            return seconds;
        });
        rows.insert(rows.end(), measured.begin(), measured.end());
        TRIDENT_CUDA_CHECK(cudaSetDevice(0));
    }
    return rows;
}

// Host seconds per kernel launch from Trident's C++ path: a small element-wise kernel issued
// back to back without waiting (the GPU runs each in less time than the host takes to issue
// it), host wall time over the launches.
double host_issue_s(cudaStream_t s) {
    constexpr int launches = 2000;
    constexpr std::int64_t cols = 1024;
    Bytes in(std::size_t(2 * cols) * sizeof(bf16)), out(std::size_t(cols) * sizeof(bf16));
    fill(in.get(), in.size(), s);
    const auto issue = [&] {
        kc::bias_gelu_forward<bf16>(as<bf16>(out), as<bf16>(in), as<bf16>(in) + cols, 1, cols, s);
    };
    issue();
    TRIDENT_CUDA_CHECK(cudaStreamSynchronize(s));
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < launches; ++i) issue();
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    TRIDENT_CUDA_CHECK(cudaStreamSynchronize(s));
    return seconds / launches;
}

} // namespace

ProfileMeasurements measure_cuda(const CudaProfileOptions& o) {
    const int devices = kc::visible_device_count();
    if (devices == 0)
        throw core::SpecError("--backend",
                              "no CUDA device visible (cudaGetDeviceCount found none); "
                              "use --backend cpu on this machine");
    const auto report = [&](double f, const std::string& what) {
        if (o.on_progress) o.on_progress(f, what);
    };
    TRIDENT_CUDA_CHECK(cudaSetDevice(0));
    cudaDeviceProp prop{};
    TRIDENT_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    kc::Stream stream;
    const cudaStream_t s = stream.get();

    ProfileMeasurements m;
    m.name = o.name;
    m.dtype = core::Dtype::bf16;
    m.fabric = "nvlink";
    m.memory_bytes = double(prop.totalGlobalMem);
    // The generation by compute capability (CUDA C Programming Guide's table): 8.x Ampere
    // (8.9 Ada), 9.0 Hopper, 10.x and 12.x Blackwell.
    m.architecture = prop.major == 8    ? (prop.minor == 9 ? "ada" : "ampere")
                     : prop.major == 9  ? "hopper"
                     : prop.major >= 10 ? "blackwell"
                                        : "";
    m.command = o.command;
    m.memory_bandwidth_bytes_per_s = copy_rate(o.quick ? (256u << 20) : (1u << 30), s);
    m.host_op_issue_s = host_issue_s(s);
    report(0.02, "copy bandwidth, launch rate");

    const std::vector<std::int64_t> gemm_sizes =
        o.quick ? std::vector<std::int64_t>{256, 2048, 8192}
                : std::vector<std::int64_t>{128, 512, 2048, 8192, 16384};
    m.gemm = measure_gemm(gemm_sizes, s, [&](double f) { report(0.02 + 0.5 * f, "gemm"); });
    m.attention = measure_attention(
        o.quick ? std::vector<std::int64_t>{16, 128} : std::vector<std::int64_t>{8, 32, 128},
        o.quick ? std::vector<std::int64_t>{512, 2048}
                : std::vector<std::int64_t>{512, 1024, 2048, 4096, 8192},
        s);
    report(0.65, "attention");
    std::vector<double> memory_sizes;
    for (int e = o.quick ? 22 : 20; e <= 30; e += o.quick ? 4 : 2)
        memory_sizes.push_back(std::ldexp(1.0, e));
    m.memory_bound = measure_memory_bound(memory_sizes, s);
    report(0.8, "memory-bound kernels");
    if (devices >= 2) {
        std::vector<double> message_sizes;
        for (int e = 10; e <= (o.quick ? 26 : 30); e += o.quick ? 4 : 2)
            message_sizes.push_back(std::ldexp(1.0, e));
        m.collectives = measure_collectives(
            devices, message_sizes, [&](double f) { report(0.8 + 0.2 * f, "collectives"); });
    }
    report(1.0, "done");

    char host[256] = {0};
    gethostname(host, sizeof host - 1);
    m.measured_on = std::string(host) + ": " + std::to_string(devices) + " × " + prop.name;
    m.method = std::string("Measured by trident profile --backend cuda on ") + prop.name +
               ": cuBLASLt bf16 GEMMs (fp32 accumulate; mean of the forward, dgrad and wgrad "
               "layouts), Trident's causal flash attention (bf16) and fused memory-bound "
               "kernels, medians of CUDA-event-timed launches; memory bandwidth = "
               "device-to-device copy rate (read + write); host_op_issue_s = host time per "
               "launch of 2,000 back-to-back small kernels. " +
               (devices >= 2 ? "NCCL collectives and send/recv over " + std::to_string(devices) +
                                   " visible GPUs (one process, groups of consecutive devices)."
                             : std::string("One GPU visible: NCCL needs two or more."));
    char date[32];
    const std::time_t now = std::time(nullptr);
    std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
    m.date = date;
    return m;
}

} // namespace trident::executor
