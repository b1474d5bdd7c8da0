// The schedule checker: completeness, local data order, matched messages, deadlock freedom.
#include "trident/core/schedule.h"

#include <string>
#include <vector>

namespace trident::core {
namespace {

[[noreturn]] void fail(std::int32_t rank, std::size_t index, const Action& a,
                       const std::string& what) {
    throw ScheduleError("rank " + std::to_string(rank) + ", action " + std::to_string(index) + " " +
                        to_string(a) + ": " + what);
}

// Per (micro-batch, virtual stage) flags, in a flat vector.
struct Grid {
    std::int32_t vstages;
    std::vector<std::uint8_t> cells;
    Grid(std::int32_t m, std::int32_t vs) : vstages(vs), cells(std::size_t(m) * vs, 0) {}
    std::uint8_t& at(std::int32_t mb, std::int32_t vs) {
        return cells[std::size_t(mb) * vstages + vs];
    }
};

enum : std::uint8_t {
    kF = 1,
    kB = 2,
    kW = 4,
    kSentAct = 8,
    kSentGrad = 16,
    kRecvAct = 32,
    kRecvGrad = 64
};

// Pass 2 of the checker: run all ranks together. Sends are posted at once; a receive waits
// for its send. Throws ScheduleError naming every blocked rank when none can move.
void run_all_ranks(const Schedule& s) {
    const std::int32_t p = s.stages, m = s.microbatches, nvs = s.virtual_stages();
    Grid posted(m, nvs); // kSentAct / kSentGrad posted by the sender's virtual stage
    std::vector<std::size_t> next(std::size_t(p), 0);
    std::size_t remaining = 0;
    for (const auto& r : s.ranks) remaining += r.size();
    while (remaining > 0) {
        bool progress = false;
        for (std::int32_t r = 0; r < p; ++r) {
            const auto& actions = s.ranks[std::size_t(r)];
            std::size_t& i = next[std::size_t(r)];
            while (i < actions.size()) {
                const Action& a = actions[i];
                const std::int32_t vs = s.virtual_stage(r, a.chunk);
                if (a.kind == ActionKind::recv_activation &&
                    !(posted.at(a.microbatch, vs - 1) & kSentAct))
                    break;
                if (a.kind == ActionKind::recv_gradient &&
                    !(posted.at(a.microbatch, vs + 1) & kSentGrad))
                    break;
                if (a.kind == ActionKind::send_activation) posted.at(a.microbatch, vs) |= kSentAct;
                if (a.kind == ActionKind::send_gradient) posted.at(a.microbatch, vs) |= kSentGrad;
                ++i;
                --remaining;
                progress = true;
            }
        }
        if (!progress) {
            std::string blocked;
            for (std::int32_t r = 0; r < p; ++r)
                if (next[std::size_t(r)] < s.ranks[std::size_t(r)].size())
                    blocked += " rank " + std::to_string(r) + " at " +
                               to_string(s.ranks[std::size_t(r)][next[std::size_t(r)]]) + ";";
            throw ScheduleError("deadlock:" + blocked);
        }
    }
}

} // namespace

void check_schedule(const Schedule& s) {
    const std::int32_t p = s.stages, m = s.microbatches, nvs = s.virtual_stages();
    if (p < 1 || s.chunks < 1 || m < 1 || std::int32_t(s.ranks.size()) != p)
        throw ScheduleError("schedule shape: " + std::to_string(s.ranks.size()) +
                            " rank lists for " + std::to_string(p) + " stages");
    Grid done(m, nvs); // what each (micro-batch, virtual stage) has seen, in program order

    // Pass 1: each rank alone — valid fields, F < B < W, data present before it is used.
    for (std::int32_t r = 0; r < p; ++r) {
        const auto& actions = s.ranks[std::size_t(r)];
        for (std::size_t i = 0; i < actions.size(); ++i) {
            const Action& a = actions[i];
            if (a.microbatch < 0 || a.microbatch >= m || a.chunk < 0 || a.chunk >= s.chunks)
                fail(r, i, a, "micro-batch or chunk out of range");
            if (!s.visits(a.microbatch, a.chunk))
                fail(r, i, a, "micro-batch goes through the other model copy");
            const std::int32_t vs = s.virtual_stage(r, a.chunk);
            std::uint8_t& cell = done.at(a.microbatch, vs);
            const bool first = vs == 0, last = vs == nvs - 1;
            const bool prev_local = !first && s.rank_of(a.microbatch, vs - 1) == r;
            const bool next_local = !last && s.rank_of(a.microbatch, vs + 1) == r;
            if (!is_compute(a.kind)) {
                const bool to_next =
                    a.kind == ActionKind::send_activation || a.kind == ActionKind::recv_gradient;
                const std::int32_t other = to_next ? vs + 1 : vs - 1;
                if (other < 0 || other >= nvs || a.peer != s.rank_of(a.microbatch, other) ||
                    a.peer == r)
                    fail(r, i, a, "peer is not the neighbouring stage on another rank");
            }
            switch (a.kind) {
            case ActionKind::forward:
                if (cell & kF) fail(r, i, a, "second forward");
                if (!first && !prev_local && !(cell & kRecvAct))
                    fail(r, i, a, "forward before its activation is received");
                if (prev_local && !(done.at(a.microbatch, vs - 1) & kF))
                    fail(r, i, a, "forward before the previous chunk's forward");
                cell |= kF;
                break;
            case ActionKind::backward_input:
                if (!(cell & kF)) fail(r, i, a, "backward before forward");
                if (cell & kB) fail(r, i, a, "second backward-input");
                if (!last && !next_local && !(cell & kRecvGrad))
                    fail(r, i, a, "backward before its gradient is received");
                if (next_local && !(done.at(a.microbatch, vs + 1) & kB))
                    fail(r, i, a, "backward before the next chunk's backward");
                cell |= kB;
                break;
            case ActionKind::backward_weight:
                if (!(cell & kB)) fail(r, i, a, "weight gradient before backward-input");
                if (cell & kW) fail(r, i, a, "second backward-weight");
                cell |= kW;
                break;
            case ActionKind::send_activation:
                if (!(cell & kF) || (cell & kSentAct))
                    fail(r, i, a, "send before forward or twice");
                cell |= kSentAct;
                break;
            case ActionKind::send_gradient:
                if (!(cell & kB) || (cell & kSentGrad))
                    fail(r, i, a, "send before backward or twice");
                cell |= kSentGrad;
                break;
            case ActionKind::recv_activation:
                if (cell & (kRecvAct | kF)) fail(r, i, a, "received twice or after forward");
                cell |= kRecvAct;
                break;
            case ActionKind::recv_gradient:
                if (cell & (kRecvGrad | kB)) fail(r, i, a, "received twice or after backward");
                cell |= kRecvGrad;
                break;
            }
        }
    }
    // Completeness: every cell has F, B, W and exactly the messages its neighbours need.
    for (std::int32_t mb = 0; mb < m; ++mb)
        for (std::int32_t vs = 0; vs < nvs; ++vs) {
            const std::uint8_t cell = done.at(mb, vs);
            const std::int32_t rank = s.rank_of(mb, vs);
            const Action probe{ActionKind::forward, mb, s.chunk_of(mb, vs), -1};
            if ((cell & (kF | kB | kW)) != (kF | kB | kW))
                fail(rank, 0, probe, "missing forward, backward-input or backward-weight");
            const bool remote_next = vs + 1 < nvs && s.rank_of(mb, vs + 1) != rank;
            const bool remote_prev = vs > 0 && s.rank_of(mb, vs - 1) != rank;
            if (bool(cell & kSentAct) != remote_next || bool(cell & kRecvGrad) != remote_next)
                fail(rank, 0, probe, "activation send / gradient receive missing or extra");
            if (bool(cell & kRecvAct) != remote_prev || bool(cell & kSentGrad) != remote_prev)
                fail(rank, 0, probe, "activation receive / gradient send missing or extra");
        }

    run_all_ranks(s);
}

} // namespace trident::core
