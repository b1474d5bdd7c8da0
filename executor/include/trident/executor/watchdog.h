#pragma once
// --distributed-timeout-minutes (the name Megatron and torch.distributed use): a collective or
// point-to-point transfer that does not complete in time ends the whole job with one line that
// names the operation, its group, the step and the ranks that did not arrive — instead of
// every other rank waiting forever for one that died or stalled.
//
// How it knows who did not arrive: every rank runs a monitor thread (MPI_THREAD_MULTIPLE) that
// answers, on a communicator of its own, what its rank is doing: which operation on which
// group and how many collectives that group has begun, or "outside communication" (computing,
// or stalled). A rank whose operation passes the timeout asks the other members of the group;
// those that are not in the same collective (or give no answer) are the ones missing. The
// lowest waiting rank prints the line and calls MPI_Abort, after telling every rank it does so,
// so the job prints it once.
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mpi.h>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace trident::executor {

// Megatron-LM's default for --distributed-timeout-minutes.
inline constexpr double kDefaultDistributedTimeoutMinutes = 10.0;
// The exit code of a job ended by the watchdog (docs/cli.md, errors and exit codes).
inline constexpr int kDistributedTimeoutExitCode = 4;

// A process group as people read it: its name and its members' world ranks.
struct GroupLabel {
    std::string name; // "data-parallel"
    std::vector<int> world_ranks;
    std::string text() const; // "the data-parallel group (ranks 0, 2)"
};

class Watchdog {
public:
    // Collective over MPI_COMM_WORLD. Watches nothing (no thread) when timeout_s <= 0, in a
    // world of one, or when MPI gives less than MPI_THREAD_MULTIPLE.
    explicit Watchdog(double timeout_s, double answer_wait_s = 2.0);
    ~Watchdog();
    Watchdog(const Watchdog&) = delete;
    Watchdog& operator=(const Watchdog&) = delete;

    bool watching() const { return monitor_.joinable(); }
    double timeout_s() const { return timeout_s_; }
    // What the run is doing, for the line: "step 3", "saving the checkpoint after step 4".
    void set_phase(std::string phase);

    // Marks this rank inside one communication call for its lifetime. `sequence` counts the
    // collectives begun on `group` (equal on every member for the same call); `peer_world_rank`
    // is the rank a send or receive waits for (-1 for a collective; then `operation` is
    // "receive from" or "send to").
    class Scope {
    public:
        explicit Scope(Watchdog* watchdog) : watchdog_(watchdog) {} // null: nothing watched
        Scope(Scope&& other) noexcept;
        Scope(const Scope&) = delete;
        Scope& operator=(const Scope&) = delete;
        Scope& operator=(Scope&&) = delete;
        ~Scope();

    private:
        Watchdog* watchdog_;
    };
    Scope enter(const char* operation, const GroupLabel& group, long long sequence,
                int peer_world_rank = -1);

    // The wire form of what a rank is doing (an answer to a probe).
    struct Activity {
        int communicating = 0;
        int first_member = -1; // of the group, a world rank
        int peer = -1;         // world rank a send or receive waits for
        long long sequence = 0;
        char group[40] = {};
        char text[216] = {}; // "waiting 3.1 s in all-reduce on …, step 3"
    };

private:
    struct Now {
        bool communicating = false;
        const char* operation = "";
        const GroupLabel* group = nullptr;
        long long sequence = 0;
        int peer = -1;
        long long serial = 0; // one more per enter(), to tell a new call from a late one
        std::chrono::steady_clock::time_point since = std::chrono::steady_clock::now();
        std::string phase = "setting up";
    };
    void leave();
    void monitor();
    Activity activity_locked() const;
    void answer_messages();
    void post(const void* data, int bytes, int to, int tag);
    void diagnose(long long serial);
    void end_job(const std::string& line);

    double timeout_s_, answer_wait_s_;
    int rank_ = 0, size_ = 1;
    MPI_Comm comm_ = MPI_COMM_NULL; // probes, answers and "I report" notes only
    mutable std::mutex mutex_;
    std::condition_variable wake_;
    bool stopping_ = false;
    Now now_;
    // Answers to the probe in flight, by world rank; and who said they report.
    int probe_ = 0;
    std::vector<Activity> answers_;
    std::vector<bool> answered_;
    int reporter_ = -1;
    struct Outgoing {
        std::vector<char> bytes;
        MPI_Request request = MPI_REQUEST_NULL;
    };
    std::deque<Outgoing> outgoing_;
    std::thread monitor_;
};

} // namespace trident::executor
