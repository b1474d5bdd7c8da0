// `trident run`: train a plan for real, one process per rank under mpirun (CPU backend).
#include "command.h"
#include "job_options.h"
#include "trident/core/atomic_file.h"
#include "trident/core/job_loader.h"
#include "trident/core/spec_error.h"
#include "trident/executor/parameter_gather.h"
#include "trident/executor/process_groups.h"
#include "trident/executor/trace_gather.h"
#include "trident/executor/trainer.h"
#include "trident/kernels/cpu.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <malloc.h>
#include <memory>
#include <sstream>
#include <string>

namespace trident::cli {
namespace {

struct RunOptions {
    core::JobInputs inputs;
    std::int64_t steps = 0;
    std::uint64_t seed = 1234;
    std::string trace;
    std::string save_params;
    int threads = 1;
};

} // namespace

Command add_run_command(CLI::App& app) {
    auto o = std::make_shared<RunOptions>();
    Command c;
    c.app = app.add_subcommand(
        "run", "Train a plan for real: mpirun -np N trident run --plan P (CPU backend)");
    add_job_options(*c.app, o->inputs);
    c.app
        ->add_option("--steps", o->steps,
                     "Optimizer steps (default: the training spec's train_iters)")
        ->check(CLI::PositiveNumber);
    c.app->add_option("--seed", o->seed, "Seed of the initial weights and the synthetic data");
    c.app->add_option("--trace", o->trace,
                      "Write the last step's measured timeline (Chrome-trace JSON)");
    c.app->add_option(
        "--save-params", o->save_params,
        "After training, write the full parameters (shards reassembled) to this file");
    c.app->add_option("--threads", o->threads, "BLAS threads per rank (default 1)")
        ->check(CLI::Range(1, 256));
    c.run = [o] {
        int argc = 0;
        char** argv = nullptr;
        executor::MpiSession mpi(&argc, &argv);
        const int rank = mpi.world_rank();
        try {
            core::JobInputs inputs = o->inputs;
            if (o->steps > 0) inputs.train_iters = o->steps;
            const core::JobSpec job = core::load_job(inputs);
            if (mpi.world_size() != job.cluster.devices())
                throw core::SpecError("cluster", "mpirun started " +
                                                     std::to_string(mpi.world_size()) +
                                                     " ranks but the plan needs tp·cp·dp·pp = " +
                                                     std::to_string(job.cluster.devices()));
            executor::require_supported(job);
            if (rank == 0)
                for (const std::string& line : executor::ignored_by_executor(job))
                    std::fprintf(stderr, "trident: warning: %s\n", line.c_str());
            // Fail before training, not after it, when the trace cannot be written (rank 0
            // writes it; everyone learns the answer).
            if (!o->trace.empty()) {
                int writable = 1;
                if (rank == 0) {
                    const auto parent = std::filesystem::absolute(o->trace).parent_path();
                    std::error_code ec;
                    writable = std::filesystem::is_directory(parent, ec) ? 1 : 0;
                }
                MPI_Bcast(&writable, 1, MPI_INT, 0, MPI_COMM_WORLD);
                if (!writable)
                    throw core::SpecError("--trace",
                                          "cannot write '" + o->trace + "': no such directory");
            }
            kernels::cpu::set_blas_threads(o->threads);
            // Activations are freed and reallocated every micro-batch: keep the freed memory in
            // the heap instead of returning it to the kernel, which would hand back zero-filled
            // pages (page faults and clearing cost ~15 % of a GPT-2 step otherwise).
            mallopt(M_MMAP_THRESHOLD, 1 << 30);
            mallopt(M_TRIM_THRESHOLD, 1 << 30);
            executor::ProcessGroups groups(job.plan, rank);
            executor::Trainer trainer(job, groups, o->seed);
            const std::int64_t steps = job.training.train_iters;
            const double tokens = double(job.training.tokens_per_step());
            if (rank == 0) {
                // cp and ep appear only when used, so the common 3D banner stays short.
                std::string degrees = "tp " + std::to_string(job.plan.tp);
                if (job.plan.cp > 1) degrees += " · cp " + std::to_string(job.plan.cp);
                degrees +=
                    " · pp " + std::to_string(job.plan.pp) + " · dp " + std::to_string(job.plan.dp);
                if (job.plan.ep > 1) degrees += " · ep " + std::to_string(job.plan.ep);
                std::printf("training %s on %d ranks: %s, %s, %lld micro-batches of %lld\n",
                            job.model.name.c_str(), mpi.world_size(), degrees.c_str(),
                            core::to_string(job.plan.schedule).c_str(),
                            (long long)job.micro_batches_per_step(),
                            (long long)job.plan.micro_batch_size);
            }
            std::vector<core::TraceEvent> events;
            double peak_activation_bytes = 0.0;
            for (std::int64_t s = 0; s < steps; ++s) {
                events.clear();
                const bool record = !o->trace.empty() && s == steps - 1;
                const executor::StepStats st = trainer.step(s, record ? &events : nullptr);
                peak_activation_bytes = std::max(peak_activation_bytes, st.peak_activation_bytes);
                if (rank == 0) {
                    std::printf("step %lld/%lld | loss %.9g | lr %.3e | grad norm %.4f | %.3f s | "
                                "%.0f tokens/s%s\n",
                                (long long)(s + 1), (long long)steps, st.loss, st.lr, st.grad_norm,
                                st.seconds, tokens / st.seconds,
                                st.skipped ? " | skipped (non-finite gradients)" : "");
                    std::fflush(stdout);
                }
                if (record) {
                    const core::Trace trace = executor::gather_trace(events);
                    if (rank == 0) {
                        std::ostringstream text;
                        core::write_chrome_trace(trace, text);
                        core::write_file_atomically(o->trace, text.str(), "--trace");
                    }
                }
            }
            // The memory model's counterpart: activations held at once, on the busiest rank.
            float peak = float(peak_activation_bytes);
            groups.world->all_reduce_max(&peak, 1);
            if (rank == 0)
                std::printf("peak activation bytes (largest rank): %.0f\n", double(peak));
            if (!o->save_params.empty()) {
                const auto full = executor::gather_parameters(trainer.parameters());
                if (rank == 0)
                    core::write_file_atomically(
                        o->save_params, executor::serialize_parameters(full), "--save-params");
            }
            if (rank == 0 && trainer.skipped_steps() > 0)
                std::printf("skipped %lld steps with non-finite gradients\n",
                            (long long)trainer.skipped_steps());
            return 0;
        } catch (const core::SpecError&) {
            if (rank == 0) throw; // one line from rank 0; the others just leave
            return 2;
        }
    };
    return c;
}

} // namespace trident::cli
