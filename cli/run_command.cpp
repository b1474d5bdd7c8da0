// `trident run`: train a plan for real, one process per rank under mpirun, on the CPU backend
// (MPI) or the CUDA backend (one GPU per rank, NCCL): indexed data or synthetic sequences,
// periodic validation, a log line per step, checkpoints that survive a killed rank
// (--save/--load) and load on either backend.
#include "command.h"
#include "format.h"
#include "job_options.h"
#include "profile_choice.h"
#include "progress_bar.h"
#include "run_report.h"
#include "thread_binding.h"
#include "training_data.h"
#include "trident/core/atomic_file.h"
#include "trident/core/job_loader.h"
#include "trident/core/profile.h"
#include "trident/core/spec_error.h"
#include "trident/core/step_numbers.h"
#include "trident/core/units.h"
#include "trident/executor/backend.h"
#include "trident/executor/checkpoint.h"
#include "trident/executor/exit_signal.h"
#include "trident/executor/mpi.h"
#include "trident/executor/parameter_gather.h"
#include "trident/executor/process_groups.h"
#include "trident/executor/trace_gather.h"
#include "trident/executor/trainer.h"
#include "trident/executor/training_loop.h"
#include "trident/kernels/cpu.h"
#include "trident/simulator/flops.h"
#if TRIDENT_WITH_CUDA
#include "trident/executor/cuda_trainer.h"
#include "trident/kernels/cuda/stream.h"
#endif

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <malloc.h>
#include <memory>
#include <optional>
#include <sstream>
#include <string>

namespace trident::cli {
namespace {

struct RunOptions {
    core::JobInputs inputs;
    std::int64_t steps = 0;
    std::string trace;
    std::string metrics_json;
    std::string save_params;
    std::string moe_routing_out;
    int threads = 1;
    std::string data_path;
    std::string split; // "": the plan file's, else 98,2,0 (Megatron's usual)
    std::int64_t eval_interval = 0;
    std::int64_t eval_iters = 10;
    std::string save, load;
    std::optional<std::int64_t> ckpt_step;
    bool exit_signal_handler = false;
    std::string exit_signal; // "": SIGTERM
    double exit_duration_mins = 0.0;
    double distributed_timeout_mins = executor::kDefaultDistributedTimeoutMinutes;
    std::int64_t log_interval = 1;
    std::int64_t save_interval = 0;
    std::int64_t exit_interval = 0;
    std::string profile;
    std::string backend = "auto";
};

int visible_gpus() {
#if TRIDENT_WITH_CUDA
    return kernels::cuda::visible_device_count();
#else
    return 0;
#endif
}

// The backend this run trains on. "auto" picks cuda where it can and the job allows it, and
// says so when a visible GPU goes unused because the CUDA backend cannot run the job.
executor::Backend resolve_backend(const std::string& requested, const core::JobSpec& job,
                                  int rank) {
    executor::Backend backend =
        executor::choose_backend(requested, TRIDENT_WITH_CUDA != 0, visible_gpus());
    if (backend == executor::Backend::cuda) {
        try {
            executor::require_supported_on_cuda(job);
        } catch (const core::SpecError& e) {
            if (requested == "cuda") throw;
            if (rank == 0)
                std::fprintf(stderr, "trident: warning: training on the CPU backend: %s: %s\n",
                             e.field().c_str(), e.reason().c_str());
            backend = executor::Backend::cpu;
        }
    }
    return backend;
}

std::unique_ptr<executor::Trainer> make_trainer(executor::Backend backend, const core::JobSpec& job,
                                                executor::ProcessGroups& groups, std::uint64_t seed,
                                                executor::SampleSource data) {
#if TRIDENT_WITH_CUDA
    if (backend == executor::Backend::cuda)
        return executor::make_cuda_trainer(job, groups, seed, std::move(data));
#endif
    (void)backend;
    return std::make_unique<executor::CpuTrainer>(job, groups, seed, std::move(data));
}

// The per-device peak the MFU column divides by, from the profile choose_profile finds.
// Nothing when neither exists; the banner says so.
// The CPU backend computes in fp32, the CUDA backend's GEMMs in bf16.
std::optional<double> peak_flops_per_s(const std::string& reference, const core::JobSpec& job,
                                       executor::Backend backend, int rank, std::string& note) {
    try {
        const core::Profile profile =
            core::Profile::from_json(choose_profile(reference, job, rank == 0).json, "profile");
        const bool cuda = backend == executor::Backend::cuda;
        note = "MFU against " + profile.name() + (cuda ? "'s bf16 peak" : "'s fp32 peak");
        return profile.peak_flops_per_s(cuda ? core::Dtype::bf16 : core::Dtype::fp32);
    } catch (const core::SpecError& e) {
        if (!reference.empty()) throw; // asked for by name: a bad one is an error
        note = "no MFU: " + e.reason();
        return std::nullopt;
    }
}

// Says once (rank 0, for the rank with the fewest cores) when a rank's CPU affinity holds
// fewer cores than its kernel threads — Open MPI's default binding — and the flags that fix it.
void warn_if_threads_share_cores(int threads, executor::Backend backend, int rank) {
    if (backend != executor::Backend::cpu) return;
    int fewest = affinity_cores();
    executor::check_mpi(MPI_Allreduce(MPI_IN_PLACE, &fewest, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD),
                        "MPI_Allreduce");
    if (rank != 0 || fewest <= 0 || fewest >= threads) return;
    std::fprintf(stderr,
                 "trident: warning: --threads: %d kernel threads per rank, but a rank may run on "
                 "only %d core%s (its CPU affinity; mpirun binds each rank to one core by "
                 "default): start it with `mpirun %s` (or `--bind-to none`)\n",
                 threads, fewest, fewest == 1 ? "" : "s", binding_flags(threads).c_str());
}

// Refuses before training what would only fail after it: an unwritable --trace directory.
// Rank 0 checks a path; every rank raises its refusal (so nothing fails after training).
void agree_on_path(const std::string& field, const std::function<std::string()>& problem,
                   int rank) {
    std::string error = rank == 0 ? problem() : std::string();
    int length = int(error.size());
    executor::check_mpi(MPI_Bcast(&length, 1, MPI_INT, 0, MPI_COMM_WORLD), "MPI_Bcast");
    error.resize(std::size_t(length));
    executor::check_mpi(MPI_Bcast(error.data(), length, MPI_CHAR, 0, MPI_COMM_WORLD), "MPI_Bcast");
    if (!error.empty()) throw core::SpecError(field, error);
}

// The folder a file is to be written in exists (rank 0 looks; every rank agrees).
void check_writable_parent(const std::string& path, const std::string& field, int rank) {
    if (path.empty()) return;
    agree_on_path(
        field,
        [&]() -> std::string {
            std::error_code ec;
            const auto parent = std::filesystem::absolute(path).parent_path();
            return std::filesystem::is_directory(parent, ec)
                       ? ""
                       : "cannot write '" + path + "': no such directory";
        },
        rank);
}

// Every output path, before step 1: a run must not train for hours and then fail to write.
// --save is created now (as the first save would) and written to once.
void check_outputs(const RunOptions& o, int rank) {
    check_writable_parent(o.trace, "--trace", rank);
    check_writable_parent(o.metrics_json, "--metrics-json", rank);
    check_writable_parent(o.save_params, "--save-params", rank);
    check_writable_parent(o.moe_routing_out, "--moe-routing-out", rank);
    if (o.save.empty()) return;
    agree_on_path(
        "--save",
        [&]() -> std::string {
            namespace fs = std::filesystem;
            std::error_code ec;
            if (fs::exists(o.save, ec) && !fs::is_directory(o.save, ec))
                return "'" + o.save + "' is a file, not a directory";
            fs::create_directories(o.save, ec);
            if (ec) return "cannot create '" + o.save + "': " + ec.message();
            const fs::path probe = fs::path(o.save) / ".trident-write-test";
            if (!std::ofstream(probe)) return "cannot write in '" + o.save + "'";
            fs::remove(probe, ec);
            return "";
        },
        rank);
}

std::string banner(const core::JobSpec& job, int ranks) {
    // cp and ep appear only when used, so the common 3D banner stays short.
    std::string degrees = "tp " + std::to_string(job.plan.tp);
    if (job.plan.cp > 1) degrees += " · cp " + std::to_string(job.plan.cp);
    degrees += " · pp " + std::to_string(job.plan.pp) + " · dp " + std::to_string(job.plan.dp);
    if (job.plan.ep > 1) degrees += " · ep " + std::to_string(job.plan.ep);
    char text[512];
    std::snprintf(text, sizeof text, "training %s on %s: %s, %s, %s of %lld",
                  job.model.name.c_str(), count_of(ranks, "rank", "ranks").c_str(), degrees.c_str(),
                  core::to_string(job.plan.schedule).c_str(),
                  count_of(job.micro_batches_per_step(), "micro-batch", "micro-batches").c_str(),
                  (long long)job.plan.micro_batch_size);
    // Everything else in the plan that changes what runs.
    return std::string(text) + "\n" + core::describe_features(job.plan, job.max_layers_per_chunk());
}

// Loads the checkpoint --load and --ckpt-step ask for (resharding as needed) and returns the
// step to go on from; says so on rank 0.
std::int64_t resume(const RunOptions& o, executor::Trainer& trainer, const core::JobSpec& job,
                    executor::ProcessGroups& groups, std::uint64_t seed) {
    const executor::LoadRequest request = executor::load_request(o.load, o.ckpt_step, o.save);
    groups.watchdog->set_phase("loading the checkpoint");
    const std::string& dir = request.dir;
    const auto position = executor::load_checkpoint(request, trainer, job, groups);
    if (position && position->seed != seed)
        throw core::SpecError("--seed", "the checkpoint in '" + dir + "' was trained with seed " +
                                            std::to_string(position->seed) + "; this run's is " +
                                            std::to_string(seed));
    const std::int64_t first_step = position ? position->iteration : 0;
    std::string note = "no checkpoint in " + dir + " yet (a first launch): starting from step 0";
    if (position)
        note = "resuming from " + dir + "/" + executor::checkpoint_name(first_step) + " (step " +
               std::to_string(first_step) + ", " + std::to_string(position->consumed_samples) +
               " samples consumed" +
               (position->resharded_from.empty() ? std::string()
                                                 : "; resharded from " + position->resharded_from) +
               ")";
    if (groups.world_rank == 0) std::printf("%s\n", note.c_str());
    if (position && job.plan.fp8.recipe == core::Fp8Recipe::delayed &&
        !position->fp8_histories_restored && groups.world_rank == 0)
        std::fprintf(stderr, "trident: warning: parallel.fp8.recipe: the checkpoint holds no "
                             "delayed-scaling amax history (saved without the delayed recipe, or "
                             "by a trident before 2026-12-04); it restarts here (scale 1 on the "
                             "first resumed step)\n");
    return first_step;
}

} // namespace

Command add_run_command(CLI::App& app) {
    auto o = std::make_shared<RunOptions>();
    Command c;
    c.app = app.add_subcommand(
        "run", "Train a plan for real: mpirun -np N trident run --plan P (CPU or CUDA backend)");
    add_job_options(*c.app, o->inputs);
    add_optimizer_options(*c.app, o->inputs);
    c.app
        ->add_option("--steps", o->steps,
                     "Optimizer steps (default: the training spec's train_iters)")
        ->check(CLI::PositiveNumber);
    c.app->add_option("--trace", o->trace,
                      "Write the last step's measured timeline (Chrome-trace JSON)");
    c.app->add_option("--metrics-json", o->metrics_json,
                      "Write every step's figures and the validation losses as JSON "
                      "(trident.metrics/1)");
    c.app->add_option(
        "--save-params", o->save_params,
        "After training, write the full parameters (shards reassembled) to this file");
    c.app->add_option("--moe-routing-out", o->moe_routing_out,
                      "After training, write the routed tokens per expert (every MoE layer, "
                      "every training micro-batch) as {\"tokens_per_expert\": [...], "
                      "\"passes\": [...]} (passes: each layer's micro-batch over its expert "
                      "group), what moe.load_balance and --moe-load-balance take");
    c.app
        ->add_option("--backend", o->backend,
                     "auto (cuda when a GPU is visible and the job runs there), cpu or cuda")
        ->capture_default_str();
    c.app
        ->add_option("--log-interval", o->log_interval,
                     "Print a line every N steps, with the loss and step time averaged over them "
                     "(Megatron's name; --metrics-json keeps every step)")
        ->check(CLI::PositiveNumber)
        ->capture_default_str();
    c.app
        ->add_option("--threads", o->threads,
                     "Kernel threads per rank, GEMMs included, CPU backend (default 1)")
        ->check(CLI::Range(1, 256));
    c.app->add_option("--profile", o->profile,
                      "Device profile whose peak the MFU column uses (default: the plan's, then "
                      "./DEVICE.json, the user's profile folder, the preset of the cluster's "
                      "device)");
    const std::string data = "Data";
    c.app
        ->add_option("--data-path", o->data_path,
                     "Prefix of an indexed dataset (P.bin + P.idx from `trident preprocess`); "
                     "default: the plan file's (`plan --data-path`), else synthetic sequences")
        ->group(data);
    c.app
        ->add_option("--split", o->split,
                     "Train,validation[,test] weights over documents (default: the plan's, "
                     "else 98,2,0)")
        ->group(data);
    c.app
        ->add_option("--eval-interval", o->eval_interval,
                     "Validation loss every N steps and after the last (0: never)")
        ->group(data)
        ->check(CLI::NonNegativeNumber);
    c.app->add_option("--eval-iters", o->eval_iters, "Global batches per validation")
        ->group(data)
        ->check(CLI::PositiveNumber)
        ->capture_default_str();
    c.app
        ->add_option(
            "--distributed-timeout-minutes", o->distributed_timeout_mins,
            "End every rank, naming the operation, group, step and missing ranks, when "
            "a collective or transfer waits this long (Megatron's name; fractions allowed)")
        ->check(CLI::PositiveNumber)
        ->capture_default_str();
    const std::string ckpt = "Checkpoints";
    c.app->add_option("--save", o->save, "Checkpoint directory to write")->group(ckpt);
    c.app
        ->add_option("--save-interval", o->save_interval,
                     "Checkpoint every N steps (and after the last); needs --save")
        ->group(ckpt)
        ->check(CLI::NonNegativeNumber);
    c.app
        ->add_option("--exit-interval", o->exit_interval,
                     "Stop (after saving, with --save) once the step number is a multiple of N; "
                     "the learning-rate schedule stays that of --train-iters")
        ->group(ckpt)
        ->check(CLI::NonNegativeNumber);
    c.app
        ->add_option("--load", o->load,
                     "Resume from the newest checkpoint in this directory (DIR/iter_N: that "
                     "iteration); a directory without checkpoints must also be --save's")
        ->group(ckpt);
    c.app
        ->add_option("--ckpt-step", o->ckpt_step,
                     "Load this iteration of --load instead of the newest (Megatron's name)")
        ->group(ckpt)
        ->check(CLI::NonNegativeNumber);
    c.app
        ->add_flag("--exit-signal-handler", o->exit_signal_handler,
                   "At SIGTERM (or --exit-signal) finish the step, save on every rank, exit 0 "
                   "(Slurm's preemption and time limit; needs --save)")
        ->group(ckpt);
    c.app
        ->add_option("--exit-signal", o->exit_signal,
                     "The signal --exit-signal-handler waits for: SIGTERM (default), SIGINT, "
                     "SIGUSR1, SIGUSR2, SIGHUP, SIGQUIT")
        ->group(ckpt);
    c.app
        ->add_option("--exit-duration-in-mins", o->exit_duration_mins,
                     "Stop (after saving, with --save) once training has run this long; every "
                     "rank stops after the same step")
        ->group(ckpt)
        ->check(CLI::PositiveNumber);
    c.run = [o] {
        const auto launched = std::chrono::steady_clock::now(); // goodput counts from here
        int argc = 0;
        char** argv = nullptr;
        executor::MpiSession mpi(&argc, &argv);
        const int rank = mpi.world_rank();
        try {
            core::JobInputs inputs = o->inputs;
            if (o->steps > 0) inputs.train_iters = o->steps;
            const core::JobSpec job = core::load_job(inputs);
            // What the executor cannot run is said first: no point starting more ranks for it.
            executor::require_supported(job);
            if (mpi.world_size() != job.cluster.devices())
                throw core::SpecError("cluster", "mpirun started " +
                                                     std::to_string(mpi.world_size()) +
                                                     " ranks but the plan needs tp·cp·dp·pp = " +
                                                     std::to_string(job.cluster.devices()));
            const executor::Backend backend = resolve_backend(o->backend, job, rank);
            if (o->save_interval > 0 && o->save.empty())
                throw core::SpecError("--save-interval", "needs --save DIR");
            if (!o->moe_routing_out.empty() && !job.model.moe)
                throw core::SpecError("--moe-routing-out",
                                      "model '" + job.model.name + "' has no experts to count");
            if (o->ckpt_step && o->load.empty())
                throw core::SpecError("--ckpt-step", "needs --load DIR (the checkpoint directory)");
            if (!o->load.empty()) executor::load_request(o->load, o->ckpt_step, o->save);
            if (rank == 0)
                for (const std::string& line :
                     executor::ignored_by_executor(job, backend == executor::Backend::cuda))
                    std::fprintf(stderr, "trident: warning: %s\n", line.c_str());
            if ((o->exit_signal_handler || !o->exit_signal.empty()) && o->save.empty())
                throw core::SpecError("--exit-signal-handler",
                                      "needs --save DIR (at the signal every rank saves there)");
            const int exit_signal_number =
                executor::parse_signal(o->exit_signal.empty() ? "SIGTERM" : o->exit_signal);
            check_outputs(*o, rank);
            const std::uint64_t seed = std::uint64_t(job.training.seed);
            // The data given here, else what the plan was made for (plan --data-path).
            const bool own_data = !o->data_path.empty();
            const std::string split = !o->split.empty()                      ? o->split
                                      : !own_data && !job.data_split.empty() ? job.data_split
                                                                             : "98,2,0";
            const TrainingData data =
                open_training_data(own_data ? o->data_path : job.data_path, split, job, seed);
            std::string mfu_note;
            const std::optional<double> peak =
                peak_flops_per_s(o->profile, job, backend, rank, mfu_note);
            kernels::cpu::set_blas_threads(o->threads);
            warn_if_threads_share_cores(o->threads, backend, rank);
            // Activations are freed and reallocated every micro-batch: keep the freed memory in
            // the heap instead of returning it to the kernel, which would hand back zero-filled
            // pages (page faults and clearing cost ~15 % of a GPT-2 step otherwise).
            mallopt(M_MMAP_THRESHOLD, 1 << 30);
            mallopt(M_TRIM_THRESHOLD, 1 << 30);
            executor::ProcessGroups groups(job.plan, rank, 60.0 * o->distributed_timeout_mins);
            const std::unique_ptr<executor::Trainer> trainer_owner =
                make_trainer(backend, job, groups, seed, data.train);
            executor::Trainer& trainer = *trainer_owner;
            executor::TrainingLoopOptions loop;
            loop.seed = seed;
            loop.trace = o->trace;
            loop.metrics_json = o->metrics_json;
            loop.save = o->save;
            loop.save_interval = o->save_interval;
            loop.exit_interval = o->exit_interval;
            loop.eval_interval = o->eval_interval;
            loop.eval_iters = o->eval_iters;
            loop.validation = data.validation;
            loop.model_flops_per_step = simulator::step_flops(job).model;
            loop.peak_flops_per_s = peak;
            loop.exit_duration_s = 60.0 * o->exit_duration_mins;
            loop.stall = executor::injected_stall(std::getenv("TRIDENT_FAULT_STALL"));
            loop.crash = executor::injected_crash(std::getenv("TRIDENT_FAULT_CRASH"));
            loop.launched = launched;
            loop.ledger_interval = o->log_interval;
            std::optional<executor::ExitSignal> exit_signal;
            if (o->exit_signal_handler || !o->exit_signal.empty()) {
                exit_signal.emplace(exit_signal_number);
                loop.exit_signal = &*exit_signal;
            }
            if (!o->load.empty()) loop.first_step = resume(*o, trainer, job, groups, seed);
            if (rank == 0) {
                std::printf("%s\nbackend: %s\ndata: %s\n%s\n",
                            banner(job, mpi.world_size()).c_str(),
                            backend == executor::Backend::cuda ? "cuda (one GPU per rank, NCCL)"
                                                               : "cpu (MPI)",
                            data.description.c_str(), mfu_note.c_str());
                std::fflush(stdout);
            }
            ProgressBar bar(double(job.training.train_iters), "steps", rank == 0);
            const executor::TrainingSummary summary = executor::run_training_loop(
                trainer, job, groups, loop, report_hooks(bar, o->save, o->log_interval));
            bar.finish();
            if (rank == 0) print_run_summary(summary, job);
            if (rank == 0 && !summary.stopped_early.empty())
                std::printf("stopped after step %lld of %lld: %s%s\n", (long long)summary.last_step,
                            (long long)job.training.train_iters, summary.stopped_early.c_str(),
                            o->save.empty() ? "" : "; the checkpoint above resumes it with --load");
            if (rank == 0) {
                std::printf("peak activation memory (largest rank): %s (%.0f bytes)\n",
                            core::bytes_text(summary.peak_activation_bytes).c_str(),
                            summary.peak_activation_bytes);
                if (job.plan.zero_stage() == 3)
                    std::printf("peak parameters held (largest rank; own slices and gathered "
                                "units): %s (%.0f bytes)\n",
                                core::bytes_text(summary.peak_parameter_bytes).c_str(),
                                summary.peak_parameter_bytes);
            }
            if (!o->save_params.empty()) {
                const auto full = executor::gather_parameters(trainer.parameters());
                if (rank == 0)
                    core::write_file_atomically(
                        o->save_params, executor::serialize_parameters(full), "--save-params");
            }
            if (!o->moe_routing_out.empty()) {
                core::Json routing = {{"tokens_per_expert", trainer.routed_tokens_per_expert()}};
                routing["passes"] = trainer.routed_passes();
                if (rank == 0)
                    core::write_file_atomically(o->moe_routing_out, routing.dump(1) + "\n",
                                                "--moe-routing-out");
            }
            if (rank == 0 && trainer.skipped_steps() > 0)
                std::printf("skipped %lld steps with non-finite gradients\n",
                            (long long)trainer.skipped_steps());
            return 0;
        } catch (const core::SpecError& e) {
            return mpi.exit_with(e); // one line from rank 0, printed before any rank leaves
        }
    };
    return c;
}

} // namespace trident::cli
