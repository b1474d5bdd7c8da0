#pragma once
// `trident launch --slurm FILE`: the sbatch script. The plan fixes nodes and tasks; the user adds
// what their site needs (--sbatch-args: time, partition, account, output), the srun MPI plugin
// (--srun-mpi, detected from `srun --mpi=list` where srun exists) and the folder the job runs
// in (--workdir: paths under it are written relative to it, so the script survives a move of
// the whole folder; paths under /tmp are warned about, since /tmp is node-local on clusters).
#include "trident/core/job.h"

#include <string>
#include <vector>

namespace trident::cli {

struct SlurmOptions {
    std::string script;      // the sbatch file to write
    std::string sbatch_args; // "--time=04:00:00 --partition=gpu --account=abc"
    std::string srun_mpi;    // "": detected
    std::string workdir;     // "": the current folder
};

// "--time=4:00:00 -p gpu --account abc" → {"--time=4:00:00", "-p gpu", "--account=abc"}; refuses
// what the plan decides (--nodes, --ntasks…) and --chdir (that is --workdir).
std::vector<std::string> sbatch_directives(const std::string& sbatch_args);

// The srun MPI plugin to use and why: --srun-mpi when given, else the best of `srun
// --mpi=list` (pmix, then pmi2), else pmix with a note that srun is not on this machine.
struct SrunMpi {
    std::string plugin;
    std::string how; // "detected by srun --mpi=list", "given", "srun not found here: assumed"
};
SrunMpi choose_srun_mpi(const std::string& given);

// Which `trident run` options take a path: outputs (always a path) and inputs (a path when such
// a file exists, else a preset name).
enum class PathKind { none, output, input };
PathKind path_kind(const std::string& flag);
bool names_a_file(const std::string& value); // P, or the dataset prefix of P.bin / P.idx

// `path` as the job sees it from `workdir` (absolute): relative when under it, else absolute.
std::string path_for_job(const std::string& path, const std::string& workdir);

// Every path the job uses that lies under /tmp (warned about: node-local on most clusters).
std::vector<std::string> paths_under_tmp(const std::vector<std::string>& paths);

// The whole script. `run` is the `trident run` command line (words, paths already for the job),
// `env` the exports, `threads` each CPU rank's kernel threads.
std::string sbatch_script(const core::JobSpec& job, const std::vector<std::string>& directives,
                          const SrunMpi& mpi, const std::string& workdir,
                          const std::vector<std::string>& env, const std::string& run_line,
                          int threads, bool uses_cuda);

} // namespace trident::cli
