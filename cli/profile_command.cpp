// `trident profile`: measure this machine and write a device profile the simulator reads.
#include "command.h"
#include "trident/core/atomic_file.h"
#include "trident/core/profile.h"
#include "trident/core/spec_error.h"
#include "trident/executor/cpu_profiler.h"
#include "trident/executor/mpi.h"

#include <cstdio>
#include <memory>
#include <unistd.h>

namespace trident::cli {
namespace {

struct ProfileOptions {
    std::string backend = "cpu";
    bool quick = false;
    std::string out = "cpu-host.json";
    std::string name = "cpu-host";
};

} // namespace

Command add_profile_command(CLI::App& app) {
    auto o = std::make_shared<ProfileOptions>();
    Command c;
    c.app = app.add_subcommand(
        "profile", "Measure this machine's kernels and collectives into a device profile");
    c.app->add_option("--backend", o->backend,
                      "cpu (the CUDA profiler comes with the CUDA backend)");
    c.app->add_flag("--quick", o->quick, "Smaller grids and messages (under 30 s)");
    c.app->add_option("--out", o->out, "Where to write the profile (default cpu-host.json)");
    c.app->add_option("--name", o->name,
                      "Profile name (default cpu-host, the localhost cluster's device)");
    c.run = [o] {
        int argc = 0;
        char** argv = nullptr;
        executor::MpiSession mpi(&argc, &argv);
        const int rank = mpi.world_rank();
        try {
            if (o->backend != "cpu")
                throw core::SpecError("--backend",
                                      "\"" + o->backend +
                                          "\" is not built: only cpu is measured so far");
            executor::CpuProfileOptions options;
            options.quick = o->quick;
            options.name = o->name;
            options.command = "mpirun -np " + std::to_string(mpi.world_size()) +
                              " trident profile --backend cpu" + (o->quick ? " --quick" : "");
            const bool tty = ::isatty(2) == 1;
            options.on_progress = [tty](double f, const std::string& what) {
                if (!tty) return;
                const int filled = int(30 * f);
                std::fprintf(stderr, "\r%-22s [%s%s] %3.0f%%", what.c_str(),
                             std::string(std::size_t(filled), '#').c_str(),
                             std::string(std::size_t(30 - filled), ' ').c_str(), 100 * f);
            };
            const core::Json profile = executor::measure_cpu_profile(options);
            if (rank != 0) return 0;
            if (tty) std::fprintf(stderr, "\r%70s\r", "");
            core::Profile::from_json(profile, "profile"); // what we write must load
            core::write_file_atomically(o->out, profile.dump(1) + "\n", "--out");
            const double peak = profile["device"]["peak_flops_per_s"]["fp32"].get<double>();
            const double bandwidth =
                profile["device"]["memory_bandwidth_bytes_per_s"].get<double>();
            std::printf("wrote %s: fp32 sgemm %.1f GFLOP/s, memory %.1f GB/s, %d ranks\n",
                        o->out.c_str(), peak / 1e9, bandwidth / 1e9, mpi.world_size());
            return 0;
        } catch (const core::SpecError&) {
            if (rank == 0) throw;
            return 2;
        }
    };
    return c;
}

} // namespace trident::cli
