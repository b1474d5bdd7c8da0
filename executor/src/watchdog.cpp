#include "trident/executor/watchdog.h"

#include "trident/executor/mpi.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <optional>

namespace trident::executor {
namespace {

using Clock = std::chrono::steady_clock;

// Message tags on the watchdog's own communicator.
constexpr int kProbe = 1;     // int: probe number — "what are you doing?"
constexpr int kAnswer = 2;    // Answer
constexpr int kReporting = 3; // int: the world rank that prints the line and aborts

constexpr auto kPollPeriod = std::chrono::milliseconds(20);
// A rank that heard another report, but is still alive this long after, aborts on its own.
constexpr double kQuietAbortAfterS = 30.0;

struct Answer {
    int probe = 0;
    Watchdog::Activity activity;
};

double seconds_since(Clock::time_point t) {
    return std::chrono::duration<double>(Clock::now() - t).count();
}

std::string rank_list(const std::vector<int>& ranks) {
    std::string text;
    const std::size_t shown = ranks.size() > 8 ? 6 : ranks.size();
    for (std::size_t i = 0; i < shown; ++i) text += (i ? ", " : "") + std::to_string(ranks[i]);
    if (shown < ranks.size())
        text += ", …, " + std::to_string(ranks.back()) + " (" + std::to_string(ranks.size()) +
                " ranks)";
    return text;
}

// "rank 1", "ranks 1 and 3", "ranks 1, 3 and 5"
std::string ranks_phrase(const std::vector<int>& ranks) {
    if (ranks.size() == 1) return "rank " + std::to_string(ranks[0]);
    std::string text = "ranks ";
    for (std::size_t i = 0; i < ranks.size(); ++i)
        text += (i == 0 ? "" : i + 1 == ranks.size() ? " and " : ", ") + std::to_string(ranks[i]);
    return text;
}

// "all-reduce", "receive from rank 3"
std::string operation_text(const char* operation, int peer) {
    return peer < 0 ? std::string(operation)
                    : std::string(operation) + " rank " + std::to_string(peer);
}

template <std::size_t N>
void copy_text(char (&to)[N], const std::string& from) {
    std::snprintf(to, N, "%s", from.c_str());
}

} // namespace

std::string GroupLabel::text() const {
    if (world_ranks.size() == 1)
        return "the " + name + " group (rank " + rank_list(world_ranks) + ")";
    return "the " + name + " group (ranks " + rank_list(world_ranks) + ")";
}

Watchdog::Scope::Scope(Scope&& other) noexcept : watchdog_(other.watchdog_) {
    other.watchdog_ = nullptr;
}

Watchdog::Scope::~Scope() {
    if (watchdog_) watchdog_->leave();
}

Watchdog::Watchdog(double timeout_s, double answer_wait_s)
    : timeout_s_(timeout_s), answer_wait_s_(answer_wait_s) {
    check_mpi(MPI_Comm_rank(MPI_COMM_WORLD, &rank_), "MPI_Comm_rank");
    check_mpi(MPI_Comm_size(MPI_COMM_WORLD, &size_), "MPI_Comm_size");
    check_mpi(MPI_Comm_dup(MPI_COMM_WORLD, &comm_), "MPI_Comm_dup");
    int provided = MPI_THREAD_SINGLE;
    check_mpi(MPI_Query_thread(&provided), "MPI_Query_thread");
    if (timeout_s_ <= 0.0 || size_ == 1) return;
    if (provided < MPI_THREAD_MULTIPLE) {
        if (rank_ == 0)
            std::fprintf(stderr, "trident: warning: --distributed-timeout-minutes: MPI was started "
                                 "without MPI_THREAD_MULTIPLE; communication is not timed\n");
        return;
    }
    answers_.assign(std::size_t(size_), Activity{});
    answered_.assign(std::size_t(size_), false);
    monitor_ = std::thread([this] { monitor(); });
}

Watchdog::~Watchdog() {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        stopping_ = true;
    }
    wake_.notify_all();
    if (monitor_.joinable()) monitor_.join();
    for (Outgoing& o : outgoing_) {
        int done = 0;
        if (o.request != MPI_REQUEST_NULL) MPI_Test(&o.request, &done, MPI_STATUS_IGNORE);
        if (o.request == MPI_REQUEST_NULL) continue;
        // A note to a rank that never read it: MPI may still read the bytes, so they outlive us.
        MPI_Request_free(&o.request);
        new std::vector<char>(std::move(o.bytes));
    }
    if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

void Watchdog::set_phase(std::string phase) {
    std::lock_guard<std::mutex> lock(mutex_);
    now_.phase = std::move(phase);
}

Watchdog::Scope Watchdog::enter(const char* operation, const GroupLabel& group, long long sequence,
                                int peer_world_rank) {
    if (!watching()) return Scope(nullptr);
    std::lock_guard<std::mutex> lock(mutex_);
    now_.communicating = true;
    now_.operation = operation;
    now_.group = &group;
    now_.sequence = sequence;
    now_.peer = peer_world_rank;
    ++now_.serial;
    now_.since = Clock::now();
    return Scope(this);
}

void Watchdog::leave() {
    std::lock_guard<std::mutex> lock(mutex_);
    now_.communicating = false;
    now_.since = Clock::now();
}

Watchdog::Activity Watchdog::activity_locked() const {
    Activity a;
    const double waited_s = seconds_since(now_.since);
    char text[sizeof a.text];
    if (now_.communicating) {
        a.communicating = 1;
        a.first_member = now_.group->world_ranks.empty() ? -1 : now_.group->world_ranks.front();
        a.peer = now_.peer;
        a.sequence = now_.sequence;
        copy_text(a.group, now_.group->name);
        std::snprintf(text, sizeof text, "waiting %.1f s in %s on %s, %s", waited_s,
                      operation_text(now_.operation, now_.peer).c_str(), now_.group->text().c_str(),
                      now_.phase.c_str());
    } else {
        std::snprintf(text, sizeof text,
                      "outside communication for %.1f s: computing, or stalled; %s", waited_s,
                      now_.phase.c_str());
    }
    copy_text(a.text, text);
    return a;
}

void Watchdog::post(const void* data, int bytes, int to, int tag) {
    Outgoing& o = outgoing_.emplace_back();
    const auto* p = static_cast<const char*>(data);
    o.bytes.assign(p, p + bytes);
    MPI_Isend(o.bytes.data(), bytes, MPI_BYTE, to, tag, comm_, &o.request);
}

// Answers probes, keeps answers to this rank's probe and notes who reports; retires sends.
void Watchdog::answer_messages() {
    for (;;) {
        int flag = 0;
        MPI_Status status;
        MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, comm_, &flag, &status);
        if (!flag) break;
        const int from = status.MPI_SOURCE;
        if (status.MPI_TAG == kAnswer) {
            Answer a;
            MPI_Recv(&a, int(sizeof a), MPI_BYTE, from, kAnswer, comm_, MPI_STATUS_IGNORE);
            if (a.probe == probe_) {
                answers_[std::size_t(from)] = a.activity;
                answered_[std::size_t(from)] = true;
            }
            continue;
        }
        int value = 0;
        MPI_Recv(&value, 1, MPI_INT, from, status.MPI_TAG, comm_, MPI_STATUS_IGNORE);
        if (status.MPI_TAG == kReporting) {
            reporter_ = reporter_ < 0 ? value : std::min(reporter_, value);
        } else if (status.MPI_TAG == kProbe) {
            Answer a;
            a.probe = value;
            {
                std::lock_guard<std::mutex> lock(mutex_);
                a.activity = activity_locked();
            }
            post(&a, int(sizeof a), from, kAnswer);
        }
    }
    while (!outgoing_.empty()) {
        int done = 0;
        MPI_Test(&outgoing_.front().request, &done, MPI_STATUS_IGNORE);
        if (!done) break;
        outgoing_.pop_front();
    }
}

void Watchdog::monitor() {
    long long diagnosed = 0;
    std::optional<Clock::time_point> heard_report;
    for (;;) {
        bool late = false;
        long long serial = 0;
        {
            std::unique_lock<std::mutex> lock(mutex_);
            if (wake_.wait_for(lock, kPollPeriod, [this] { return stopping_; })) return;
            serial = now_.serial;
            late =
                now_.communicating && serial != diagnosed && seconds_since(now_.since) > timeout_s_;
        }
        answer_messages();
        if (reporter_ >= 0 && !heard_report) heard_report = Clock::now();
        if (heard_report && seconds_since(*heard_report) > kQuietAbortAfterS)
            MPI_Abort(MPI_COMM_WORLD, kDistributedTimeoutExitCode);
        if (late && reporter_ < 0) {
            diagnosed = serial;
            diagnose(serial);
        }
    }
}

// Past the timeout: asks the group's other members (the peer, for a send or receive) what they
// are doing, names those not in the same call, and ends the job — unless the call completes
// meanwhile (a late rank, not a lost one).
void Watchdog::diagnose(long long serial) {
    GroupLabel group;
    std::string operation, phase;
    long long sequence = 0;
    int peer = -1;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        group = *now_.group;
        operation = operation_text(now_.operation, now_.peer);
        phase = now_.phase;
        sequence = now_.sequence;
        peer = now_.peer;
    }
    std::vector<int> asked;
    if (peer >= 0) asked.push_back(peer);
    for (int r : group.world_ranks)
        if (peer < 0 && r != rank_) asked.push_back(r);
    ++probe_;
    std::fill(answered_.begin(), answered_.end(), false);
    for (int r : asked) post(&probe_, int(sizeof probe_), r, kProbe);
    const auto still_waiting = [&] {
        std::lock_guard<std::mutex> lock(mutex_);
        return now_.communicating && now_.serial == serial && !stopping_;
    };
    const auto wait_for = [&](double seconds, auto done) {
        const auto start = Clock::now();
        while (seconds_since(start) < seconds && !done()) {
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
            answer_messages();
            if (!still_waiting()) return false;
        }
        return true;
    };
    const auto all_answered = [&] {
        return std::all_of(asked.begin(), asked.end(),
                           [&](int r) { return bool(answered_[std::size_t(r)]); });
    };
    if (!wait_for(answer_wait_s_, all_answered)) return;

    const std::string first_group = group.name.substr(0, sizeof(Activity::group) - 1);
    std::vector<int> missing, arrived = {rank_};
    for (int r : asked) {
        const Activity& a = answers_[std::size_t(r)];
        const bool same_call = answered_[std::size_t(r)] && a.communicating && peer < 0 &&
                               a.peer < 0 && a.sequence == sequence && first_group == a.group &&
                               a.first_member == group.world_ranks.front();
        (same_call ? arrived : missing).push_back(r);
    }
    char head[256];
    std::snprintf(head, sizeof head, "%s on %s did not complete within %g minutes (%s)",
                  operation.c_str(), group.text().c_str(), timeout_s_ / 60.0, phase.c_str());
    std::string line = head;
    if (!missing.empty()) {
        line += ": " + ranks_phrase(missing) + " did not arrive (";
        for (std::size_t i = 0; i < missing.size(); ++i) {
            const int r = missing[i];
            const std::string doing = answered_[std::size_t(r)]
                                          ? std::string(answers_[std::size_t(r)].text)
                                          : "no answer: the process is gone or hung";
            line += (i ? "; " : "") +
                    (missing.size() > 1 ? "rank " + std::to_string(r) + ": " : "") + doing;
        }
        line += ")";
    }
    // The lowest rank waiting in this call reports at once; the others give it time to.
    if (*std::min_element(arrived.begin(), arrived.end()) != rank_ &&
        (!wait_for(2.0 * answer_wait_s_, [&] { return reporter_ >= 0; }) || reporter_ >= 0))
        return;
    end_job(line);
}

// Tells every rank this one reports, gives a rank that said the same at the same moment the
// chance to win (the lower rank prints), prints the line and aborts the job.
void Watchdog::end_job(const std::string& line) {
    for (int r = 0; r < size_; ++r)
        if (r != rank_) post(&rank_, int(sizeof rank_), r, kReporting);
    const auto start = Clock::now();
    while (seconds_since(start) < 0.2) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
        answer_messages();
    }
    if (reporter_ >= 0 && reporter_ < rank_) return;
    std::fprintf(stderr, "trident: error: --distributed-timeout-minutes: %s\n", line.c_str());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, kDistributedTimeoutExitCode);
}

} // namespace trident::executor
