#include "trident/executor/exit_signal.h"

#include "trident/core/spec_error.h"

#include <array>
#include <cctype>
#include <utility>

namespace trident::executor {
namespace {

// Written only by the handler, read between steps: async-signal-safe.
volatile std::sig_atomic_t g_received = 0;

void note_signal(int) {
    g_received = 1;
}

constexpr std::array<std::pair<const char*, int>, 6> kSignals = {{{"SIGTERM", SIGTERM},
                                                                  {"SIGINT", SIGINT},
                                                                  {"SIGUSR1", SIGUSR1},
                                                                  {"SIGUSR2", SIGUSR2},
                                                                  {"SIGHUP", SIGHUP},
                                                                  {"SIGQUIT", SIGQUIT}}};

} // namespace

ExitSignal::ExitSignal(int signal_number) : signal_(signal_number) {
    g_received = 0;
    struct sigaction action {};
    action.sa_handler = note_signal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART; // MPI's and the file system's calls carry on
    sigaction(signal_, &action, &previous_);
}

ExitSignal::~ExitSignal() {
    sigaction(signal_, &previous_, nullptr);
}

bool ExitSignal::received() const {
    return g_received != 0;
}

int parse_signal(const std::string& name) {
    std::string upper;
    for (const char c : name) upper += char(std::toupper(static_cast<unsigned char>(c)));
    for (const auto& [text, number] : kSignals)
        if (upper == text || "SIG" + upper == text || upper == std::to_string(number))
            return number;
    std::string known;
    for (const auto& [text, number] : kSignals)
        known += (known.empty() ? "" : ", ") + std::string(text);
    throw core::SpecError("--exit-signal", "'" + name + "' is not one of " + known);
}

std::string signal_name(int signal_number) {
    for (const auto& [text, number] : kSignals)
        if (number == signal_number) return text;
    return "signal " + std::to_string(signal_number);
}

} // namespace trident::executor
