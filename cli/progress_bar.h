#pragma once
// A one-line progress bar on stderr ("[#####.....] 45% 120/300 steps · 1,234 tokens/s ·
// eta 1m20s"), redrawn in place — only when stderr reaches a terminal, so logs and pipes keep
// their plain per-step lines. Under mpirun a rank's stderr is a pipe to its launcher, which
// writes to the user's terminal: the bar shows when the launcher's own stderr is one.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <unistd.h>

namespace trident::cli {

class ProgressBar {
public:
    ProgressBar(double total, std::string unit, bool enabled = true)
        : total_(total), unit_(std::move(unit)), enabled_(enabled && stderr_reaches_terminal()),
          start_(std::chrono::steady_clock::now()) {}
    ~ProgressBar() { finish(); }
    ProgressBar(const ProgressBar&) = delete;
    ProgressBar& operator=(const ProgressBar&) = delete;

    // `done` of `total`; `detail` is appended (a rate, a loss).
    void update(double done, const std::string& detail = {}) {
        if (!enabled_) return;
        const double elapsed_s =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
        const double fraction = total_ > 0 ? std::min(1.0, done / total_) : 1.0;
        constexpr int kWidth = 28;
        std::string bar(std::size_t(fraction * kWidth), '#');
        bar.resize(kWidth, '.');
        std::string eta;
        if (fraction > 0 && fraction < 1) {
            const long s = long(elapsed_s * (1 - fraction) / fraction);
            eta = " · eta " + (s >= 60 ? std::to_string(s / 60) + "m" : "") +
                  std::to_string(s % 60) + "s";
        }
        std::fprintf(stderr, "\r[%s] %3.0f%% %.0f/%.0f %s%s%s\033[K", bar.c_str(), fraction * 100,
                     done, total_, unit_.c_str(), detail.empty() ? "" : (" · " + detail).c_str(),
                     eta.c_str());
        std::fflush(stderr);
        drawn_ = true;
    }
    void finish() {
        if (drawn_) std::fprintf(stderr, "\n");
        drawn_ = false;
    }

    // Our stderr, or (a pipe to mpirun or orted) the launcher's, is a terminal.
    static bool stderr_reaches_terminal() {
        if (::isatty(2)) return true;
        if (!std::getenv("OMPI_COMM_WORLD_RANK") && !std::getenv("PMI_RANK")) return false;
        char target[256] = {};
        const std::string link = "/proc/" + std::to_string(::getppid()) + "/fd/2";
        const ssize_t n = ::readlink(link.c_str(), target, sizeof target - 1);
        const std::string path(target, n > 0 ? std::size_t(n) : 0u);
        return path.rfind("/dev/pts/", 0) == 0 || path.rfind("/dev/tty", 0) == 0;
    }

private:
    double total_;
    std::string unit_;
    bool enabled_;
    bool drawn_ = false;
    std::chrono::steady_clock::time_point start_;
};

} // namespace trident::cli
