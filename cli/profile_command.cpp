// `trident profile`: measure this machine and write a device profile the simulator reads.
#include "command.h"
#include "trident/core/atomic_file.h"
#include "trident/core/profile.h"
#include "trident/core/spec_error.h"
#include "trident/core/units.h"
#include "trident/executor/cpu_profiler.h"
#include "trident/executor/mpi.h"

#if TRIDENT_WITH_CUDA
#include "trident/executor/cuda_profiler.h"
#include "trident/kernels/cuda/stream.h"
#endif

#include <cstdio>
#include <filesystem>
#include <functional>
#include <memory>
#include <unistd.h>
#include <vector>

namespace trident::cli {
namespace {

struct ProfileOptions {
    std::string backend = "cpu";
    bool quick = false;
    std::string out;  // default: ./<name>.json and a copy in the user's profile folder
    std::string name; // default: cpu-host, or cuda-device for --backend cuda
    int test_slow_rank = -1;
};

// Progress on stderr: a bar redrawn in place on a terminal ("what [#####     ]  42%"); else
// (under mpirun, in CI, in a log) one line each time the phase changes, so a slow or stuck
// measurement shows where it is.
std::function<void(double, const std::string&)> progress_bar() {
    const bool tty = ::isatty(2) == 1;
    auto phase = std::make_shared<std::string>();
    return [tty, phase](double f, const std::string& what) {
        if (!tty) {
            if (what == *phase) return;
            *phase = what;
            std::fprintf(stderr, "trident profile: %s (%.0f %% done)\n", what.c_str(), 100 * f);
            std::fflush(stderr);
            return;
        }
        const int filled = int(30 * f);
        std::fprintf(stderr, "\r%-22s [%s%s] %3.0f%%", what.c_str(),
                     std::string(std::size_t(filled), '#').c_str(),
                     std::string(std::size_t(30 - filled), ' ').c_str(), 100 * f);
    };
}

void clear_progress() {
    if (::isatty(2) == 1) std::fprintf(stderr, "\r%70s\r", "");
}

// Where the profile goes: --out, or ./NAME.json and a copy in the user's profile folder, the
// two places plan, simulate and run look for the cluster's device (core::find_profile).
std::vector<std::string> destinations(const ProfileOptions& o) {
    if (!o.out.empty()) return {o.out};
    std::vector<std::string> places = {o.name + ".json"};
    if (const std::string dir = core::user_profile_dir(); !dir.empty())
        places.push_back((std::filesystem::path(dir) / (o.name + ".json")).string());
    return places;
}

// Writes every destination (the folder of a default one made first); returns them, joined.
std::string write_profile(const ProfileOptions& o, const core::Json& profile) {
    core::Profile::from_json(profile, "profile"); // what we write must load
    std::string written;
    for (const std::string& path : destinations(o)) {
        const std::filesystem::path parent = std::filesystem::path(path).parent_path();
        std::error_code ec;
        if (o.out.empty() && !parent.empty()) std::filesystem::create_directories(parent, ec);
        if (ec)
            throw core::SpecError("TRIDENT_PROFILE_DIR",
                                  "cannot create " + parent.string() + ": " + ec.message());
        core::write_file_atomically(path, profile.dump(1) + "\n", o.out.empty() ? path : "--out");
        written += (written.empty() ? "" : " and ") + path;
    }
    return written;
}

// `--backend cuda`: one process drives every visible GPU (NCCL cliques from ncclCommInitAll),
// so it refuses to run under mpirun with several ranks.
int profile_cuda(const ProfileOptions& o, int world_size) {
#if TRIDENT_WITH_CUDA
    if (world_size > 1)
        throw core::SpecError("--backend", "cuda profiles from one process, which drives every "
                                           "visible GPU itself: run it without mpirun");
    if (kernels::cuda::visible_device_count() == 0)
        throw core::SpecError("--backend", "no CUDA device visible (cudaGetDeviceCount found "
                                           "none); measure this machine with --backend cpu");
    executor::CudaProfileOptions options;
    options.quick = o.quick;
    options.name = o.name;
    options.command = std::string("trident profile --backend cuda") + (o.quick ? " --quick" : "");
    options.on_progress = progress_bar();
    const executor::ProfileMeasurements m = executor::measure_cuda(options);
    const core::Json profile = executor::measured_profile_json(m);
    clear_progress();
    const std::string written = write_profile(o, profile);
    std::printf(
        "wrote %s: %s, bf16 GEMM %s, copy %.0f GB/s%s\n", written.c_str(), m.measured_on.c_str(),
        core::flop_rate_text(profile["device"]["peak_flops_per_s"]["bf16"].get<double>()).c_str(),
        m.memory_bandwidth_bytes_per_s / 1e9,
        m.collectives.empty() ? ", no collective tables (one GPU)" : "");
    return 0;
#else
    (void)o;
    (void)world_size;
    throw core::SpecError("--backend", "cuda is not in this build (configured without CUDA: "
                                       "reconfigure with -DTRIDENT_CUDA=ON)");
#endif
}

} // namespace

Command add_profile_command(CLI::App& app) {
    auto o = std::make_shared<ProfileOptions>();
    Command c;
    c.app = app.add_subcommand(
        "profile", "Measure this machine's kernels and collectives into a device profile");
    c.app->add_option("--backend", o->backend,
                      "cpu (this machine's cores over MPI) or cuda (the visible GPUs over NCCL)");
    c.app->add_flag("--quick", o->quick, "Smaller grids and messages (cpu: under 30 s)");
    c.app->add_option(
        "--out", o->out,
        "Where to write the profile (default: ./NAME.json and a copy in the user's profile "
        "folder, where plan, simulate and run look)");
    c.app->add_option("--name", o->name,
                      "Profile name (default cpu-host, the localhost cluster's device; "
                      "cuda-device for --backend cuda)");
    // Hidden (empty group): slows one rank's collective repetitions, for the deadlock test.
    c.app->add_option("--test-slow-rank", o->test_slow_rank)->group("");
    c.run = [o] {
        int argc = 0;
        char** argv = nullptr;
        executor::MpiSession mpi(&argc, &argv);
        const int rank = mpi.world_rank();
        try {
            if (o->name.empty()) o->name = o->backend == "cuda" ? "cuda-device" : "cpu-host";
            if (o->backend == "cuda") return profile_cuda(*o, mpi.world_size());
            if (o->backend != "cpu")
                throw core::SpecError("--backend",
                                      "\"" + o->backend + "\" is not a backend: cpu or cuda");
            executor::CpuProfileOptions options;
            options.quick = o->quick;
            options.name = o->name;
            options.slow_rank = o->test_slow_rank;
            options.command = "mpirun -np " + std::to_string(mpi.world_size()) +
                              " trident profile --backend cpu" + (o->quick ? " --quick" : "");
            const auto bar = progress_bar();
            options.on_progress = [bar, rank](double f, const std::string& what) {
                if (rank == 0) bar(f, what);
            };
            const core::Json profile = executor::measure_cpu_profile(options);
            // Rank 0 alone checks and writes; the others learn whether that worked, so every
            // refusal leaves through the same collective exit.
            std::string written, failed; // rank 0: where it wrote, or why it could not
            if (rank == 0) {
                clear_progress();
                try {
                    written = write_profile(*o, profile);
                } catch (const core::SpecError& e) {
                    failed = e.field() + "\n" + e.reason();
                }
            }
            int length = int(failed.size());
            executor::check_mpi(MPI_Bcast(&length, 1, MPI_INT, 0, MPI_COMM_WORLD), "MPI_Bcast");
            failed.resize(std::size_t(length));
            executor::check_mpi(MPI_Bcast(failed.data(), length, MPI_CHAR, 0, MPI_COMM_WORLD),
                                "MPI_Bcast");
            if (!failed.empty()) {
                const auto cut = failed.find('\n');
                throw core::SpecError(failed.substr(0, cut), failed.substr(cut + 1));
            }
            if (rank != 0) return 0;
            const double peak = profile["device"]["peak_flops_per_s"]["fp32"].get<double>();
            const double bandwidth =
                profile["device"]["memory_bandwidth_bytes_per_s"].get<double>();
            std::printf("wrote %s: fp32 sgemm %s, memory %.1f GB/s, %d ranks\n", written.c_str(),
                        core::flop_rate_text(peak).c_str(), bandwidth / 1e9, mpi.world_size());
            return 0;
        } catch (const core::SpecError& e) {
            return mpi.exit_with(e); // one line from rank 0, printed before any rank leaves
        }
    };
    return c;
}

} // namespace trident::cli
