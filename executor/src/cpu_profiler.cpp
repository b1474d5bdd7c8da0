#include "trident/executor/cpu_profiler.h"

#include "host_memory.h"
#include "trident/core/model_spec.h"
#include "trident/executor/measured_profile.h"
#include "trident/executor/mpi.h"
#include "trident/kernels/cpu.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <ctime>
#include <fstream>
#include <functional>
#include <map>
#include <mpi.h>
#include <optional>
#include <random>
#include <thread>
#include <unistd.h>
#include <vector>

namespace trident::executor {
namespace {

namespace k = kernels::cpu;
using Clock = std::chrono::steady_clock;
using Vec = std::vector<float>;

constexpr double kBudgetS = 0.05; // time one measurement may take
constexpr int kMaxRepetitions = 50;

double median(std::vector<double> times) {
    std::sort(times.begin(), times.end());
    return times[times.size() / 2];
}

// Median seconds of a rank-local `run` (no MPI inside) over repetitions, after one warm-up;
// repeats until ~50 ms are spent. `prepare` runs untimed before each repetition.
template <typename F, typename P = void (*)()>
double time_median(
    F&& run, int min_reps = 3, P prepare = [] {}) {
    run();
    std::vector<double> times;
    const auto budget_start = Clock::now();
    for (int i = 0; i < kMaxRepetitions; ++i) {
        prepare();
        const auto start = Clock::now();
        run();
        times.push_back(std::chrono::duration<double>(Clock::now() - start).count());
        if (int(times.size()) >= min_reps &&
            std::chrono::duration<double>(Clock::now() - budget_start).count() > kBudgetS)
            break;
    }
    return median(std::move(times));
}

// In training an operation's operands arrive from other kernels, not warm from its last call:
// the GEMM, memory-bound and collective timings start each repetition after this 64 MiB sweep.
void flush_caches() {
    static std::vector<char> sweep(64u << 20);
    for (std::size_t i = 0; i < sweep.size(); i += 64) sweep[i] = char(sweep[i] + 1);
}

// Median seconds of a collective `op` over `comm`, each repetition starting from flushed
// caches and a barrier (timed on warm buffers, 2-rank 4 MiB all-gathers and reduce-scatters
// ran 1.45× their cold rates on the 2026-12-04 machine, faster than any the executor sees). The
// repetition count comes from the slowest rank's warm-up, reduced over `comm`, so every rank
// runs the same number of collectives: a count decided on each rank's own clock differs
// between ranks under load, and they end up in different collectives (a deadlock).
double time_collective(MPI_Comm comm, const std::function<void()>& op, bool slow_for_test) {
    const auto once = [&] {
        flush_caches();
        check_mpi(MPI_Barrier(comm), "MPI_Barrier");
        const auto start = Clock::now();
        op();
        return std::chrono::duration<double>(Clock::now() - start).count();
    };
    const auto started = Clock::now();
    once();
    // The budget counts the flushes, so a small collective is not repeated 50 sweeps long.
    double warmup_s = std::chrono::duration<double>(Clock::now() - started).count();
    check_mpi(MPI_Allreduce(MPI_IN_PLACE, &warmup_s, 1, MPI_DOUBLE, MPI_MAX, comm),
              "MPI_Allreduce");
    const int repetitions =
        std::clamp(int(kBudgetS / std::max(warmup_s, 1e-9)), 3, kMaxRepetitions);
    std::vector<double> times;
    for (int i = 0; i < repetitions; ++i) {
        times.push_back(once());
        if (slow_for_test && i < 5) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return median(std::move(times));
}

Vec filled(std::size_t n) {
    Vec v(n);
    std::mt19937 g(7);
    std::uniform_real_distribution<float> d(-1.0f, 1.0f);
    for (auto& x : v) x = d(g);
    return v;
}

std::string cpu_model() {
    std::ifstream in("/proc/cpuinfo");
    for (std::string line; std::getline(in, line);)
        if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
    return "unknown CPU";
}

// Operands for the GEMM sweeps: `groups` A, B and C blocks of up to `largest`² each.
struct GemmOperands {
    Vec a, b, c;
    std::size_t block = 0;
    GemmOperands(std::int64_t groups, std::int64_t largest)
        : a(filled(std::size_t(groups * largest * largest))),
          b(filled(std::size_t(groups * largest * largest))),
          c(std::size_t(groups * largest * largest)), block(std::size_t(largest * largest)) {}
};

// Seconds of `groups` GEMMs C[m×n] = A[m×k]·B[k×n], each on its own operands one after another
// — how the CPU backend runs its local experts (groups 1: one GEMM) — in the three layouts a
// linear layer uses, forward (A·Bᵀ), input gradient (A·B) and weight gradient (Aᵀ·B),
// averaged, since the cost model times all three passes from one table. In training a GEMM's
// operands arrive from other kernels, not warm from its last call: each repetition starts
// with the caches flushed (flush_caches).
double gemm_seconds(GemmOperands& o, std::int64_t groups, std::int64_t m, std::int64_t n,
                    std::int64_t kk) {
    const auto each = [&](auto&& gemm) {
        return [&, gemm] {
            for (std::int64_t g = 0; g < groups; ++g) {
                const std::size_t at = std::size_t(g) * o.block;
                gemm(o.c.data() + at, o.a.data() + at, o.b.data() + at);
            }
        };
    };
    const double forward = time_median(each([&](float* c, const float* a, const float* b) {
                                           k::matmul_forward(c, a, b, nullptr, m, kk, n);
                                       }),
                                       3, flush_caches);
    const double input = time_median(each([&](float* c, const float* a, const float* b) {
                                         k::matmul_backward_input(c, a, b, m, n, kk);
                                     }),
                                     3, flush_caches);
    const double weight = time_median(each([&](float* c, const float* a, const float* b) {
                                          k::matmul_backward_weight(c, nullptr, a, b, kk, n, m);
                                      }),
                                      3, flush_caches);
    return (forward + input + weight) / 3.0;
}

std::vector<GemmTiming> measure_gemm(const std::vector<std::int64_t>& sizes,
                                     const std::function<void(double)>& progress) {
    std::vector<GemmTiming> rows;
    const std::size_t total = sizes.size() * sizes.size() * sizes.size();
    GemmOperands operands(1, sizes.back());
    for (std::int64_t m : sizes)
        for (std::int64_t n : sizes)
            for (std::int64_t kk : sizes) {
                rows.push_back({m, n, kk, gemm_seconds(operands, 1, m, n, kk)});
                progress(double(rows.size()) / double(total));
            }
    return rows;
}

// The grouped-GEMM table (MoE experts): few tokens per expert (m, and k for the weight
// gradient) against weight-sized n.
std::vector<GroupedGemmTiming> measure_grouped_gemm(const std::vector<std::int64_t>& groups,
                                                    const std::vector<std::int64_t>& tokens,
                                                    const std::vector<std::int64_t>& widths) {
    std::vector<GroupedGemmTiming> rows;
    GemmOperands operands(groups.back(), std::max(tokens.back(), widths.back()));
    for (std::int64_t g : groups)
        for (std::int64_t m : tokens)
            for (std::int64_t n : widths)
                for (std::int64_t kk : tokens)
                    rows.push_back({g, m, n, kk, gemm_seconds(operands, g, m, n, kk)});
    return rows;
}

std::vector<AttentionTiming> measure_attention(const std::vector<std::int64_t>& batch_heads,
                                               const std::vector<std::int64_t>& seqs,
                                               const std::vector<std::int64_t>& head_dims) {
    std::vector<AttentionTiming> rows;
    for (std::int64_t D : head_dims)
        for (std::int64_t bh : batch_heads)
            for (std::int64_t T : seqs) {
                const Vec qkv = filled(std::size_t(bh * T * 3 * D));
                Vec out(std::size_t(bh * T * D)), lse(std::size_t(bh * T)), dqkv(qkv.size());
                const Vec dout = filled(out.size());
                // The flash kernels, which `trident run` uses for plans with flash_attention (the
                // default) and the simulator times from this table; batch_heads sequences of one
                // head each: B = batch_heads, H = KV = 1.
                const double f = time_median([&] {
                    k::flash_attention_forward(out.data(), lse.data(), qkv.data(), bh, T, 1, 1, D);
                });
                const double b = time_median([&] {
                    k::flash_attention_backward(dqkv.data(), dout.data(), out.data(), qkv.data(),
                                                lse.data(), bh, T, 1, 1, D);
                });
                rows.push_back({bh, T, D, f, b});
            }
    return rows;
}

std::map<std::string, std::vector<MemoryTiming>>
measure_memory_bound(const std::vector<double>& sizes) {
    std::map<std::string, std::vector<MemoryTiming>> tables;
    const auto table = [&](const char* name, double bytes_per_element,
                           const std::function<void(std::int64_t)>& run) {
        std::vector<MemoryTiming> rows;
        for (double bytes : sizes) {
            const auto n = std::int64_t(bytes / bytes_per_element);
            if (n < 64) continue;
            rows.push_back({bytes, time_median([&] { run(n); }, 3, flush_caches)});
        }
        tables[name] = rows;
    };
    const std::int64_t largest = std::int64_t(sizes.back());
    Vec x = filled(std::size_t(largest / 4 + 64)), y(x.size()), z(x.size()), w = filled(x.size()),
        m(x.size()), v(x.size());
    const std::int64_t C = 64;
    Vec mean(x.size() / C + 1), rstd(mean.size());
    std::vector<std::int32_t> targets(x.size() / 256 + 1, 3);
    // Bytes moved per element (reads + writes), as the simulator's layer operations count them.
    table("layernorm", 8.0, [&](std::int64_t n) {
        k::layernorm_forward(y.data(), mean.data(), rstd.data(), x.data(), w.data(), w.data(),
                             n / C, C, float(core::ModelSpec{}.norm_epsilon));
    });
    table("rmsnorm", 8.0, [&](std::int64_t n) {
        k::rmsnorm_forward(y.data(), rstd.data(), x.data(), w.data(), n / C, C,
                           float(core::ModelSpec{}.norm_epsilon));
    });
    table("gelu", 8.0, [&](std::int64_t n) { k::gelu_forward(y.data(), x.data(), n); });
    // n outputs: rows of 64, each reading its gate and its up value (2 × 64 inputs). Rows of
    // n / 128 timed half the work the bytes name, which priced SwiGLU at twice its speed.
    table("swiglu", 12.0,
          [&](std::int64_t n) { k::swiglu_forward(y.data(), x.data(), n / 64, 64); });
    // The backwards, with the bytes the simulator counts for them (simulator/op_builder.h):
    // GeLU's reads x and dy, writes dx; SwiGLU's reads gate, up and dy, writes both gradients.
    table("gelu_backward", 12.0,
          [&](std::int64_t n) { k::gelu_backward(z.data(), x.data(), w.data(), n); });
    table("swiglu_backward", 20.0,
          [&](std::int64_t n) { k::swiglu_backward(z.data(), x.data(), w.data(), n / 64, 64); });
    table("softmax_cross_entropy", 12.0, [&](std::int64_t n) {
        k::cross_entropy_row_max(mean.data(), x.data(), n / 256, 256);
        std::copy_n(x.data(), (n / 256) * 256, z.data());
        k::cross_entropy_exp(z.data(), rstd.data(), mean.data(), n / 256, 256);
    });
    table("adamw", 28.0, [&](std::int64_t n) {
        k::adamw_update(z.data(), x.data(), m.data(), v.data(), n, 1e-4f, 0.9f, 0.95f, 1e-8f, 0.1f,
                        3, 1.0f);
    });
    table("elementwise", 12.0, [&](std::int64_t n) {
        for (std::int64_t i = 0; i < n; ++i)
            y[std::size_t(i)] = x[std::size_t(i)] + w[std::size_t(i)];
    });
    return tables;
}

// One collective of the sweep over `comm` (this rank's group), timed as time_collective does.
double time_point(const SweepPoint& p, MpiCommunicator& group, Vec& send, Vec& recv,
                  bool slow_for_test) {
    const MPI_Comm comm = group.handle();
    const int n = int(p.count);
    return time_collective(
        comm,
        [&] {
            switch (p.collective) {
            case core::Collective::all_reduce:
                check_mpi(MPI_Allreduce(send.data(), recv.data(), n, MPI_FLOAT, MPI_SUM, comm),
                          "MPI_Allreduce");
                break;
            case core::Collective::all_gather:
                check_mpi(MPI_Allgather(send.data(), n, MPI_FLOAT, recv.data(), n, MPI_FLOAT, comm),
                          "MPI_Allgather");
                break;
            case core::Collective::reduce_scatter:
                check_mpi(
                    MPI_Reduce_scatter_block(send.data(), recv.data(), n, MPI_FLOAT, MPI_SUM, comm),
                    "MPI_Reduce_scatter_block");
                break;
            case core::Collective::all_to_all:
                check_mpi(MPI_Alltoall(send.data(), n, MPI_FLOAT, recv.data(), n, MPI_FLOAT, comm),
                          "MPI_Alltoall");
                break;
            case core::Collective::broadcast:
                check_mpi(MPI_Bcast(send.data(), n, MPI_FLOAT, 0, comm), "MPI_Bcast");
                break;
            case core::Collective::send_recv:
                if (group.rank() == 0)
                    check_mpi(MPI_Send(send.data(), n, MPI_FLOAT, 1, 0, comm), "MPI_Send");
                else
                    check_mpi(MPI_Recv(recv.data(), n, MPI_FLOAT, 0, 0, comm, MPI_STATUS_IGNORE),
                              "MPI_Recv");
                break;
            }
        },
        slow_for_test);
}

// Collectives among groups of `group` consecutive world ranks (the shared sweep); the slowest
// rank's time of each, agreed over the world so every rank records the same rows.
std::vector<CollectiveTiming> measure_collectives(const std::vector<double>& sizes, int world,
                                                  int rank, int slow_rank,
                                                  const std::function<void(double)>& progress) {
    std::vector<CollectiveTiming> rows;
    std::vector<int> groups;
    for (int g = 2; g <= world; g *= 2) groups.push_back(g);
    Vec send = filled(std::size_t(sizes.back() / 4) + 16), recv(send.size() + 16);
    std::size_t done = 0, total = 0;
    for (int g : groups) total += collective_sweep(sizes, g).size();
    for (int g : groups) {
        MPI_Comm comm = MPI_COMM_NULL;
        check_mpi(MPI_Comm_split(MPI_COMM_WORLD, rank < (world / g) * g ? rank / g : MPI_UNDEFINED,
                                 rank, &comm),
                  "MPI_Comm_split");
        std::optional<MpiCommunicator> group;
        if (comm != MPI_COMM_NULL) group.emplace(comm); // owns it from here
        const auto measured =
            run_collective_sweep(collective_sweep(sizes, g), [&](const SweepPoint& p) {
                double seconds = group ? time_point(p, *group, send, recv, rank == slow_rank) : 0.0;
                check_mpi(
                    MPI_Allreduce(MPI_IN_PLACE, &seconds, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD),
                    "MPI_Allreduce");
                progress(double(++done) / double(total));
                return seconds;
            });
        rows.insert(rows.end(), measured.begin(), measured.end());
    }
    return rows;
}

} // namespace

core::Json measure_cpu_profile(const CpuProfileOptions& o) {
    int rank = 0, world = 1;
    check_mpi(MPI_Comm_rank(MPI_COMM_WORLD, &rank), "MPI_Comm_rank");
    check_mpi(MPI_Comm_size(MPI_COMM_WORLD, &world), "MPI_Comm_size");
    k::set_blas_threads(1); // as `trident run` runs: one rank per core
    const auto report = [&](double f, const std::string& what) {
        if (rank == 0 && o.on_progress) o.on_progress(f, what);
    };
    const std::vector<std::int64_t> gemm_sizes =
        o.quick ? std::vector<std::int64_t>{64, 256, 1024, 2048}
                : std::vector<std::int64_t>{32, 128, 512, 2048, 4096};
    std::vector<double> memory_sizes, message_sizes;
    for (int e = 12; e <= (o.quick ? 24 : 28); e += 2) memory_sizes.push_back(std::ldexp(1.0, e));
    // Messages to 64 MiB even when quick: an FSDP unit or a gradient bucket is megabytes, and
    // 2-rank shared-memory rates fall by up to half from 4 to 16 MiB as the caches run out.
    for (int e = 10; e <= (o.quick ? 26 : 28); e += 2) message_sizes.push_back(std::ldexp(1.0, e));

    // Every rank measures the kernels at once, as they run during training (sharing memory
    // bandwidth and clocks); rank 0's figures go into the profile.
    ProfileMeasurements m;
    report(0.0, "gemm");
    m.gemm = measure_gemm(gemm_sizes, [&](double f) { report(0.35 * f, "gemm"); });
    report(0.35, "grouped gemm");
    m.grouped_gemm = measure_grouped_gemm({2, 8}, {16, 64, 256},
                                          o.quick ? std::vector<std::int64_t>{256}
                                                  : std::vector<std::int64_t>{256, 1024});
    report(0.4, "attention");
    m.attention = measure_attention(o.quick ? std::vector<std::int64_t>{1, 8}
                                            : std::vector<std::int64_t>{1, 4, 16},
                                    o.quick ? std::vector<std::int64_t>{32, 128, 512}
                                            : std::vector<std::int64_t>{32, 128, 512, 1024},
                                    {16, 64});
    report(0.5, "memory-bound kernels");
    m.memory_bound = measure_memory_bound(memory_sizes);
    report(0.6, "collectives");
    check_mpi(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
    m.collectives = measure_collectives(message_sizes, world, rank, o.slow_rank,
                                        [&](double f) { report(0.6 + 0.4 * f, "collectives"); });
    if (rank != 0) return {};

    // The largest elementwise size streams main memory rather than cache.
    const auto& streams = m.memory_bound.at("elementwise");
    m.memory_bandwidth_bytes_per_s = streams.back().bytes / streams.back().seconds;
    char host[256] = {0};
    gethostname(host, sizeof host - 1);
    char date[32];
    const std::time_t now = std::time(nullptr);
    std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
    m.name = o.name;
    m.architecture = "cpu";
    m.dtype = core::Dtype::fp32;
    m.fabric = "shm";
    m.communication_blocks_compute = true;
    m.method = "Measured by trident profile --backend cpu with the executor's own CPU kernels "
               "(OpenBLAS sgemm, one thread per rank) and MPI collectives among " +
               std::to_string(world) +
               " local ranks; medians of repeated runs, each from flushed caches. Memory bandwidth "
               "= elementwise rate at the largest size; memory = this "
               "machine's RAM, shared by its ranks. A blocking MPI collective holds its rank's "
               "core, so nothing overlaps it (device.sms = communication_sms = 1).";
    m.measured_on =
        std::string(host) + ": " + cpu_model() + ", " + std::to_string(world) + " ranks";
    m.date = date;
    m.command = o.command;
    m.memory_bytes = std::max(0.0, meminfo_bytes("MemTotal"));
    return measured_profile_json(m);
}

} // namespace trident::executor
