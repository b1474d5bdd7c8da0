#pragma once
// Runs the built `trident` binary with arguments and captures exit code, stdout and stderr.
#include <string>
#include <vector>

namespace trident::test {

struct CommandResult {
    int exit_code = -1;
    std::string out;
    std::string err;
};

CommandResult run_trident(const std::vector<std::string>& args);
// Runs a whole shell command line (e.g. under mpirun).
CommandResult run_shell(const std::string& command);

// Splits on spaces (the test manifests never quote).
std::vector<std::string> split_words(const std::string& line);

} // namespace trident::test
