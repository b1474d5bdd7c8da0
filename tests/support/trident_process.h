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

// A file's whole text ("" when it cannot be read).
std::string file_text(const std::string& path);
// The number after `"key": ` in JSON text; -1 when the key is absent.
double number_after(const std::string& text, const std::string& key);

} // namespace trident::test
