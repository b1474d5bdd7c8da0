#include "trident_process.h"

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <sys/wait.h>
#include <unistd.h>

namespace trident::test {
namespace {

std::string quote(const std::string& s) {
    std::string q(1, '\'');
    for (char c : s) {
        if (c == '\'')
            q.append("'\\''");
        else
            q.push_back(c);
    }
    q.push_back('\'');
    return q;
}

std::string slurp(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

} // namespace

CommandResult run_shell(const std::string& command_line) {
    char out_template[] = "/tmp/trident-test-out-XXXXXX";
    char err_template[] = "/tmp/trident-test-err-XXXXXX";
    const int out_fd = mkstemp(out_template);
    const int err_fd = mkstemp(err_template);
    close(out_fd);
    close(err_fd);
    const std::string command =
        command_line + " >" + quote(out_template) + " 2>" + quote(err_template) + " </dev/null";
    const int status = std::system(command.c_str());
    CommandResult r;
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    r.out = slurp(out_template);
    r.err = slurp(err_template);
    unlink(out_template);
    unlink(err_template);
    return r;
}

CommandResult run_trident(const std::vector<std::string>& args) {
    std::string command = quote(TRIDENT_BINARY);
    for (const auto& a : args) command += " " + quote(a);
    return run_shell(command);
}

std::vector<std::string> split_words(const std::string& line) {
    std::vector<std::string> words;
    std::istringstream in(line);
    for (std::string w; in >> w;) words.push_back(w);
    return words;
}

std::string file_text(const std::string& path) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
}

double number_after(const std::string& text, const std::string& key) {
    const auto at = text.find("\"" + key + "\": ");
    return at == std::string::npos ? -1.0 : std::stod(text.substr(at + key.size() + 4));
}

} // namespace trident::test
