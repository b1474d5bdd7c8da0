// `trident launch`: runs a plan across hosts. With --hostfile it builds the mpirun command
// (OpenMPI) that starts one `trident run` per rank, placing ranks so that every
// tensor-parallel group sits on one node (Megatron's rank order puts tp fastest, so whole
// blocks of tp consecutive ranks per host suffice); with --slurm it writes an sbatch script
// that does the same through srun. --dry-run prints the command instead of running it.
#include "command.h"
#include "format.h"
#include "slurm_script.h"
#include "thread_binding.h"
#include "trident/core/atomic_file.h"
#include "trident/core/job_loader.h"
#include "trident/core/spec_error.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <unistd.h>

namespace trident::cli {
namespace {

struct LaunchOptions {
    std::string plan, hostfile, mpirun = "mpirun", mpirun_args;
    SlurmOptions slurm;
    bool dry_run = false;
    std::vector<std::string> run_args;
};

struct Host {
    std::string name;
    std::int64_t slots = 1;
};

// OpenMPI's hostfile: "name [slots=N] [max_slots=M]" per line, '#' comments.
std::vector<Host> read_hostfile(const std::string& path) {
    std::ifstream in(path);
    if (!in) throw core::SpecError("--hostfile", "cannot read '" + path + "'");
    std::vector<Host> hosts;
    std::string line;
    for (int number = 1; std::getline(in, line); ++number) {
        line = line.substr(0, line.find('#'));
        std::istringstream words(line);
        Host h;
        if (!(words >> h.name)) continue;
        std::string word;
        while (words >> word) {
            const auto eq = word.find('=');
            const std::string key = word.substr(0, eq);
            if (eq == std::string::npos || (key != "slots" && key != "max_slots"))
                throw core::SpecError(path + ":" + std::to_string(number),
                                      "expected 'HOST slots=N', found '" + word + "'");
            char* end = nullptr;
            const long long v = std::strtoll(word.c_str() + eq + 1, &end, 10);
            if (*end != '\0' || v < 1)
                throw core::SpecError(path + ":" + std::to_string(number),
                                      key + " must be a positive integer");
            if (key == "slots") h.slots = v;
        }
        hosts.push_back(h);
    }
    if (hosts.empty()) throw core::SpecError("--hostfile", "'" + path + "' names no host");
    return hosts;
}

// Ranks per host: hosts filled in order with whole tensor-parallel groups.
std::vector<std::pair<std::string, std::int64_t>> place(const std::vector<Host>& hosts,
                                                        std::int64_t world, std::int64_t tp) {
    std::vector<std::pair<std::string, std::int64_t>> placed;
    std::int64_t left = world;
    for (const Host& h : hosts) {
        const std::int64_t n = std::min(left, h.slots / tp * tp);
        if (n > 0) placed.emplace_back(h.name, n);
        left -= n;
        if (left == 0) break;
    }
    if (left > 0)
        throw core::SpecError("--hostfile", "the hosts hold " + std::to_string(world - left) +
                                                " of the plan's " + std::to_string(world) +
                                                " ranks in whole tensor-parallel groups of " +
                                                std::to_string(tp) +
                                                " (add hosts or slots; a group never spans hosts)");
    return placed;
}

std::string quote(const std::string& word) {
    if (!word.empty() && word.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTU"
                                                "VWXYZ0123456789_-./=:,@+%") == std::string::npos)
        return word;
    std::string q = "'";
    for (const char ch : word) q += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
    return q + "'";
}

std::string joined(const std::vector<std::string>& words) {
    std::string s;
    for (const auto& w : words) s += (s.empty() ? "" : " ") + quote(w);
    return s;
}

std::string self_path() {
    std::error_code ec;
    const auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
    return ec ? "trident" : p.string();
}

// A GPU cluster needs NCCL's environment; the CPU backend needs none of it.
bool uses_cuda(const core::JobSpec& job) {
    return job.cluster.device != "cpu-host";
}

// The kernel threads `trident run` will use: its --threads among the arguments after --.
int run_threads(const std::vector<std::string>& run_args) {
    for (std::size_t i = 0; i < run_args.size(); ++i) {
        std::string value;
        if (run_args[i] == "--threads" && i + 1 < run_args.size()) value = run_args[i + 1];
        if (run_args[i].rfind("--threads=", 0) == 0) value = run_args[i].substr(10);
        if (value.empty()) continue;
        char* end = nullptr;
        const long threads = std::strtol(value.c_str(), &end, 10);
        if (*end != '\0' || threads < 1 || threads > 256)
            throw core::SpecError("--threads", "expected 1 to 256 threads, got \"" + value + "\"");
        return int(threads);
    }
    return 1;
}

// Placement and binding: consecutive ranks fill a host (tensor groups stay on one). The CPU
// backend binds each rank to as many cores as its kernel threads; GPU ranks are left unbound.
std::vector<std::string> binding(const core::JobSpec& job, int threads) {
    if (uses_cuda(job)) return {"--map-by", "slot", "--bind-to", "none"};
    std::vector<std::string> flags;
    std::istringstream words(binding_flags(threads));
    for (std::string w; words >> w;) flags.push_back(w);
    if (threads == 1) flags.insert(flags.begin(), {"--map-by", "slot"});
    return flags;
}

std::vector<std::string> environment(const core::JobSpec& job) {
    std::vector<std::string> env{"OMP_NUM_THREADS=1"};
    if (uses_cuda(job)) {
        // One hardware queue per device keeps kernels in issue order, which Megatron's
        // communication overlap relies on; NCCL warnings reach the logs.
        env.push_back("CUDA_DEVICE_MAX_CONNECTIONS=1");
        env.push_back("NCCL_DEBUG=WARN");
    }
    return env;
}

// The `trident run` words as the job sees them from `workdir`: every path relative to it when
// under it; each path under /tmp warned about (node-local on clusters).
std::string run_line_for_job(const std::vector<std::string>& run, const std::string& workdir,
                             std::vector<std::string>& paths) {
    std::vector<std::string> words = run;
    const auto for_job = [&](const std::string& flag, std::string& value) {
        const PathKind kind = path_kind(flag);
        if (kind == PathKind::none) return;
        // An input that is no file here is a preset name, or a path only the cluster has.
        if (kind == PathKind::input && !names_a_file(value)) {
            if (value.find('/') != std::string::npos) paths.push_back(value);
            return;
        }
        paths.push_back(value);
        value = path_for_job(value, workdir);
    };
    for (std::size_t i = 1; i < words.size(); ++i) {
        const std::size_t eq = words[i].find('=');
        if (eq != std::string::npos && words[i].rfind("--", 0) == 0) {
            std::string value = words[i].substr(eq + 1);
            for_job(words[i].substr(0, eq), value);
            words[i] = words[i].substr(0, eq + 1) + value;
        } else if (i + 1 < words.size()) {
            for_job(words[i], words[i + 1]);
        }
    }
    return joined(words);
}

// Says, loudly, when the job would train one step of synthetic data (a plan from `plan --out`
// without --train-iters or --data-path) and nothing after -- changes that.
void warn_if_one_synthetic_step(const core::JobSpec& job, const std::vector<std::string>& args) {
    bool iters = false, data = !job.data_path.empty();
    for (const std::string& a : args) {
        iters = iters || a.rfind("--train-iters", 0) == 0 || a.rfind("--steps", 0) == 0;
        data = data || a.rfind("--data-path", 0) == 0;
    }
    if (job.training.train_iters != 1 || iters) {
        if (!data)
            std::fprintf(stderr, "trident: warning: --plan: the job trains on synthetic sequences "
                                 "(the plan records no data path): add `-- --data-path PREFIX`\n");
        return;
    }
    std::fprintf(stderr,
                 "trident: warning: --plan: the job trains 1 iteration%s (the plan's "
                 "train_iters is 1): add `-- --train-iters N%s`\n",
                 data ? "" : " of synthetic sequences", data ? "" : " --data-path PREFIX");
}

void write_slurm_script(const SlurmOptions& o, const core::JobSpec& job, const std::string& plan,
                        const std::vector<std::string>& run_args) {
    const std::vector<std::string> directives = sbatch_directives(o.sbatch_args);
    const SrunMpi mpi = choose_srun_mpi(o.srun_mpi);
    std::string workdir =
        std::filesystem::absolute(o.workdir.empty() ? "." : o.workdir).lexically_normal().string();
    if (workdir.size() > 1 && workdir.back() == '/') workdir.pop_back();
    std::vector<std::string> paths{self_path(), workdir};
    if (!job.data_path.empty()) paths.push_back(job.data_path);
    std::vector<std::string> run{self_path(), "run", "--plan", plan};
    run.insert(run.end(), run_args.begin(), run_args.end());
    const std::string run_line = run_line_for_job(run, workdir, paths);
    const int threads = run_threads(run_args);
    core::write_file_atomically(o.script,
                                sbatch_script(job, directives, mpi, workdir, environment(job),
                                              run_line, threads, uses_cuda(job)),
                                "--slurm");
    for (const std::string& p : paths_under_tmp(paths))
        std::fprintf(stderr,
                     "trident: warning: --slurm: %s is under a node-local folder on most "
                     "clusters (other nodes will not see it): put it on a shared file "
                     "system\n",
                     p.c_str());
    warn_if_one_synthetic_step(job, run_args);
    std::printf("wrote %s: sbatch %s starts %s on %s (srun --mpi=%s: %s)\n", o.script.c_str(),
                o.script.c_str(), count_of(job.cluster.devices(), "rank", "ranks").c_str(),
                count_of(job.cluster.nodes, "node", "nodes").c_str(), mpi.plugin.c_str(),
                mpi.how.c_str());
}

} // namespace

Command add_launch_command(CLI::App& app) {
    auto o = std::make_shared<LaunchOptions>();
    Command c;
    c.app = app.add_subcommand(
        "launch", "Run a plan across hosts: mpirun from a hostfile, or an sbatch script (--slurm)");
    c.app->add_option("--plan", o->plan, "Plan file (from `trident plan --out`)")->required();
    c.app->add_option("--hostfile", o->hostfile, "OpenMPI hostfile: 'HOST slots=N' per line");
    c.app->add_option("--slurm", o->slurm.script,
                      "Write an sbatch script (srun) to this file instead");
    c.app->add_option("--sbatch-args", o->slurm.sbatch_args,
                      "With --slurm: sbatch options for the script, one string (\"--time=04:00:00 "
                      "--partition=gpu --account=abc --output=logs/%j.out\")");
    c.app->add_option("--srun-mpi", o->slurm.srun_mpi,
                      "With --slurm: srun's MPI plugin (default: pmix or pmi2, as `srun "
                      "--mpi=list` offers)");
    c.app->add_option("--workdir", o->slurm.workdir,
                      "With --slurm: the folder the job runs in (default: this one); paths under "
                      "it are written relative to it");
    c.app->add_flag("--dry-run", o->dry_run, "Print the command instead of running it");
    c.app->add_option("--mpirun", o->mpirun, "The mpirun to use")->capture_default_str();
    c.app->add_option("--mpirun-args", o->mpirun_args,
                      "Extra mpirun arguments, one string (e.g. \"--oversubscribe\")");
    c.app->add_option("run_args", o->run_args, "Arguments for `trident run`, after --");
    c.run = [o, app = c.app] {
        core::JobInputs inputs;
        inputs.plan = o->plan;
        const core::JobSpec job = core::load_job(inputs);
        const std::int64_t world = job.cluster.devices();
        // A file travels as an absolute path (ranks may start elsewhere); a preset by name.
        const std::string plan = std::filesystem::exists(o->plan)
                                     ? std::filesystem::absolute(o->plan).string()
                                     : o->plan;
        std::vector<std::string> run{self_path(), "run", "--plan", plan};
        run.insert(run.end(), o->run_args.begin(), o->run_args.end());
        if (!o->slurm.script.empty()) {
            if (!o->hostfile.empty())
                throw core::SpecError("--slurm", "Slurm places the ranks: drop --hostfile");
            write_slurm_script(o->slurm, job, plan, o->run_args);
            return 0;
        }
        for (const char* flag : {"--sbatch-args", "--srun-mpi", "--workdir"})
            if (*app->get_option(flag))
                throw core::SpecError(flag, "goes with --slurm FILE (it shapes the sbatch script)");
        if (o->hostfile.empty())
            throw core::SpecError("--hostfile", "required (or --slurm FILE for Slurm)");
        const auto placed = place(read_hostfile(o->hostfile), world, job.plan.tp);
        warn_if_one_synthetic_step(job, o->run_args);
        std::vector<std::string> cmd{o->mpirun, "-np", std::to_string(world)};
        std::string hosts;
        for (const auto& [name, n] : placed)
            hosts += (hosts.empty() ? "" : ",") + name + ":" + std::to_string(n);
        cmd.insert(cmd.end(), {"--host", hosts});
        const std::vector<std::string> bind = binding(job, run_threads(o->run_args));
        cmd.insert(cmd.end(), bind.begin(), bind.end());
        if (::geteuid() == 0) cmd.push_back("--allow-run-as-root"); // OpenMPI refuses root else
        for (const std::string& e : environment(job)) cmd.insert(cmd.end(), {"-x", e});
        std::istringstream extra(o->mpirun_args);
        for (std::string w; extra >> w;) cmd.push_back(w);
        cmd.insert(cmd.end(), run.begin(), run.end());
        if (o->dry_run) {
            std::printf("%s\n", joined(cmd).c_str());
            return 0;
        }
        std::fflush(stdout);
        std::vector<char*> argv;
        for (auto& w : cmd) argv.push_back(w.data());
        argv.push_back(nullptr);
        ::execvp(argv[0], argv.data());
        throw core::SpecError("--mpirun", "cannot run '" + o->mpirun + "'");
    };
    return c;
}

} // namespace trident::cli
