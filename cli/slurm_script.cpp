#include "slurm_script.h"

#include "trident/core/spec_error.h"

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <sstream>
#include <unistd.h>

namespace trident::cli {
namespace {

namespace fs = std::filesystem;

// sbatch options the plan decides (nodes and tasks) or another launch option does.
struct Reserved {
    const char* long_name;
    const char* short_name;
    const char* instead;
};
constexpr std::array<Reserved, 6> kReserved = {{
    {"nodes", "N", "the plan's cluster.nodes decides it (plan again with --nodes)"},
    {"ntasks", "n", "the plan decides it (one task per device)"},
    {"ntasks-per-node", "", "the plan's devices_per_node decides it"},
    {"gpus-per-node", "", "the plan's devices_per_node decides it"},
    {"cpus-per-task", "c", "it follows `trident run --threads` (give that after --)"},
    {"chdir", "D", "give --workdir (paths in the script are made relative to it)"},
}};

void refuse_reserved(const std::string& directive) {
    const bool is_long = directive.rfind("--", 0) == 0;
    std::string name = directive.substr(is_long ? 2 : 1);
    name = name.substr(0, name.find_first_of("= "));
    for (const Reserved& r : kReserved)
        if (name == (is_long ? r.long_name : r.short_name) && !name.empty())
            throw core::SpecError("--sbatch-args", directive + ": " + r.instead);
}

bool on_path(const std::string& program) {
    const char* path = std::getenv("PATH");
    std::istringstream dirs(path ? path : "");
    for (std::string dir; std::getline(dirs, dir, ':');)
        if (!dir.empty() && ::access((fs::path(dir) / program).c_str(), X_OK) == 0) return true;
    return false;
}

// The words `srun --mpi=list` prints (Slurm 20 prefixes each line with "srun:").
std::vector<std::string> srun_mpi_list() {
    std::vector<std::string> words;
    std::unique_ptr<FILE, int (*)(FILE*)> pipe(::popen("srun --mpi=list 2>&1", "r"), ::pclose);
    if (!pipe) return words;
    std::string text;
    char buffer[512];
    while (std::fgets(buffer, sizeof buffer, pipe.get())) text += buffer;
    std::istringstream in(text);
    for (std::string w; in >> w;) words.push_back(w);
    return words;
}

} // namespace

std::vector<std::string> sbatch_directives(const std::string& sbatch_args) {
    std::vector<std::string> words, directives;
    std::istringstream in(sbatch_args);
    for (std::string w; in >> w;) words.push_back(w);
    for (std::size_t i = 0; i < words.size(); ++i) {
        const std::string& w = words[i];
        if (w.size() < 2 || w[0] != '-')
            throw core::SpecError("--sbatch-args",
                                  "'" + w +
                                      "' is not an sbatch option (give --name=value or -x "
                                      "value, e.g. \"--time=04:00:00 --partition=gpu\")");
        std::string directive = w;
        const bool is_long = w.rfind("--", 0) == 0;
        const bool has_value = w.find('=') != std::string::npos || (!is_long && w.size() > 2);
        if (!has_value && i + 1 < words.size() && words[i + 1][0] != '-')
            directive += (is_long ? "=" : " ") + words[++i];
        refuse_reserved(directive);
        directives.push_back(directive);
    }
    return directives;
}

SrunMpi choose_srun_mpi(const std::string& given) {
    if (!given.empty()) return {given, "given"};
    if (!on_path("srun"))
        return {"pmix", "srun is not on this machine: pmix assumed; --srun-mpi to choose"};
    const std::vector<std::string> offered = srun_mpi_list();
    const auto offers = [&](const std::string& name) {
        for (const std::string& w : offered)
            if (w == name) return true;
        return false;
    };
    for (const char* plugin : {"pmix", "pmi2"})
        if (offers(plugin)) return {plugin, "the best of `srun --mpi=list` here"};
    for (const std::string& w : offered)
        if (w.rfind("pmix_v", 0) == 0) return {w, "the best of `srun --mpi=list` here"};
    return {"pmix", "`srun --mpi=list` offers neither pmix nor pmi2 here: pmix assumed; "
                    "--srun-mpi to choose"};
}

PathKind path_kind(const std::string& flag) {
    for (const char* f :
         {"--save", "--load", "--trace", "--metrics-json", "--save-params", "--moe-routing-out"})
        if (flag == f) return PathKind::output;
    for (const char* f :
         {"--data-path", "--model", "--cluster", "--training", "--plan", "--profile"})
        if (flag == f) return PathKind::input;
    return PathKind::none;
}

bool names_a_file(const std::string& value) {
    std::error_code ec;
    for (const char* suffix : {"", ".bin", ".idx"}) // a dataset prefix names P.bin and P.idx
        if (fs::exists(value + suffix, ec)) return true;
    return false;
}

std::string path_for_job(const std::string& path, const std::string& workdir) {
    const fs::path absolute = fs::absolute(path).lexically_normal();
    const fs::path relative = absolute.lexically_relative(workdir);
    if (!relative.empty() && *relative.begin() != "..") return relative.string();
    return absolute.string();
}

std::vector<std::string> paths_under_tmp(const std::vector<std::string>& paths) {
    std::vector<std::string> found;
    for (const std::string& p : paths) {
        const std::string absolute = fs::absolute(p).lexically_normal().string();
        for (const char* node_local : {"/tmp", "/dev/shm"}) {
            const std::string dir(node_local);
            if (absolute == dir || absolute.rfind(dir + "/", 0) == 0) found.push_back(absolute);
        }
    }
    return found;
}

std::string sbatch_script(const core::JobSpec& job, const std::vector<std::string>& directives,
                          const SrunMpi& mpi, const std::string& workdir,
                          const std::vector<std::string>& env, const std::string& run_line,
                          int threads, bool uses_cuda) {
    const std::int64_t per_node = job.cluster.devices_per_node;
    std::ostringstream s;
    s << "#!/bin/bash\n"
      << "# Written by trident launch for " << job.model.name << " on " << job.cluster.nodes
      << " × " << per_node << " " << job.cluster.device << "\n"
      << "#SBATCH --job-name=trident-" << job.model.name << "\n"
      << "#SBATCH --nodes=" << job.cluster.nodes << "\n"
      << "#SBATCH --ntasks-per-node=" << per_node << "\n";
    if (uses_cuda)
        s << "#SBATCH --gpus-per-node=" << per_node << "\n";
    else
        s << "#SBATCH --cpus-per-task=" << threads << "\n";
    s << "#SBATCH --exclusive\n"
      << "#SBATCH --chdir=" << workdir << "\n";
    for (const std::string& d : directives) s << "#SBATCH " << d << "\n";
    s << "\n";
    for (const std::string& e : env) s << "export " << e << "\n";
    // Block distribution: consecutive ranks fill a node first, so tensor groups (consecutive
    // ranks, tp dividing devices_per_node) stay inside one. --kill-on-bad-exit: a rank that
    // fails ends the step at once instead of leaving the others blocked in a collective.
    s << "\n# srun --mpi=" << mpi.plugin << ": " << mpi.how << "\n"
      << "srun --mpi=" << mpi.plugin << " --kill-on-bad-exit=1 --ntasks=" << job.cluster.devices()
      << " --ntasks-per-node=" << per_node << " --distribution=block:block "
      << (uses_cuda ? "" : "--cpus-per-task=" + std::to_string(threads) + " --cpu-bind=cores ")
      << run_line << "\n";
    return s.str();
}

} // namespace trident::cli
