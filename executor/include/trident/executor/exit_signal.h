#pragma once
// Preemption: Slurm sends SIGTERM at the time limit and when it preempts a job, then SIGKILL a
// grace period later (KillWait, 30 s by default). With Megatron's --exit-signal-handler the
// run notes the signal, finishes the step it is in, saves on every rank and exits 0.
// ExitSignal installs the handler for its lifetime (restoring the old one after); the handler
// only sets a flag, which the training loop reads between steps.
#include <csignal>
#include <string>

namespace trident::executor {

class ExitSignal {
public:
    explicit ExitSignal(int signal_number);
    ~ExitSignal();
    ExitSignal(const ExitSignal&) = delete;
    ExitSignal& operator=(const ExitSignal&) = delete;

    bool received() const; // on this process, since construction
    int signal_number() const { return signal_; }

private:
    int signal_;
    struct sigaction previous_ {};
};

// "SIGTERM", "TERM", "15" → 15; SpecError("--exit-signal") for anything else.
int parse_signal(const std::string& name);
std::string signal_name(int signal_number); // 15 → "SIGTERM"

} // namespace trident::executor
