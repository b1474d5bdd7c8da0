#include "trident/core/schedule.h"

#include "trident/core/spec_error.h"

#include <algorithm>
#include <deque>

namespace trident::core {
namespace {

using Order = std::vector<Action>; // compute actions only

Action F(std::int32_t mb, std::int32_t chunk = 0) {
    return {ActionKind::forward, mb, chunk, -1};
}
Action B(std::int32_t mb, std::int32_t chunk = 0) {
    return {ActionKind::backward_input, mb, chunk, -1};
}
Action W(std::int32_t mb, std::int32_t chunk = 0) {
    return {ActionKind::backward_weight, mb, chunk, -1};
}

// GPipe (Huang et al. 2019): all forwards, then all backwards.
Order gpipe(std::int32_t, std::int32_t, std::int32_t m) {
    Order o;
    for (std::int32_t i = 0; i < m; ++i) o.push_back(F(i));
    for (std::int32_t i = 0; i < m; ++i) {
        o.push_back(B(i));
        o.push_back(W(i));
    }
    return o;
}

// 1F1B / PipeDream-Flush (Narayanan et al. 2021, §2.2.1): p − r − 1 warm-up forwards, then one
// forward and one backward alternately, then the remaining backwards.
Order one_f_one_b(std::int32_t p, std::int32_t r, std::int32_t m) {
    const std::int32_t warmup = std::min(p - r - 1, m);
    Order o;
    for (std::int32_t i = 0; i < warmup; ++i) o.push_back(F(i));
    for (std::int32_t j = 0; j < m - warmup; ++j) {
        o.push_back(F(warmup + j));
        o.push_back(B(j));
        o.push_back(W(j));
    }
    for (std::int32_t j = m - warmup; j < m; ++j) {
        o.push_back(B(j));
        o.push_back(W(j));
    }
    return o;
}

// Interleaved 1F1B (Narayanan et al. 2021, §2.2.2), as Megatron-LM orders it: the k-th forward
// runs chunk (k mod p·v) / p on micro-batch (k / p·v)·p + k mod p; backwards walk the chunks
// in reverse. Warm-up: 2(p − r − 1) + (v − 1)·p forwards.
Order interleaved(std::int32_t p, std::int32_t r, std::int32_t v, std::int32_t m) {
    const std::int32_t total = m * v;
    const auto microbatch = [&](std::int32_t k) { return (k / (p * v)) * p + k % p; };
    const auto chunk = [&](std::int32_t k, bool forward) {
        const std::int32_t c = (k % (p * v)) / p;
        return forward ? c : v - 1 - c;
    };
    const std::int32_t warmup = std::min(2 * (p - r - 1) + (v - 1) * p, total);
    Order o;
    for (std::int32_t k = 0; k < warmup; ++k) o.push_back(F(microbatch(k), chunk(k, true)));
    for (std::int32_t i = 0; i < total - warmup; ++i) {
        const std::int32_t kf = warmup + i;
        o.push_back(F(microbatch(kf), chunk(kf, true)));
        o.push_back(B(microbatch(i), chunk(i, false)));
        o.push_back(W(microbatch(i), chunk(i, false)));
    }
    for (std::int32_t k = total - warmup; k < total; ++k) {
        o.push_back(B(microbatch(k), chunk(k, false)));
        o.push_back(W(microbatch(k), chunk(k, false)));
    }
    return o;
}

// ZB-H1 (Qi et al., ICLR 2024, §3.1): 1F1B's order of F and B, with rank r holding back its
// weight-gradient passes by r micro-batches. The chain of B's that carries each gradient
// upstream then never waits behind a W, and the held-back W's fill the cool-down, where 1F1B
// idles. Rank r keeps at most (p − r) + r = p micro-batches' W inputs, the first stage's 1F1B
// peak, so the peak memory is 1F1B's.
Order zero_bubble_h1(std::int32_t p, std::int32_t r, std::int32_t m) {
    const std::int32_t warmup = std::min(p - r - 1, m);
    const std::int32_t delay = r;
    Order o;
    std::deque<std::int32_t> pending_w;
    for (std::int32_t i = 0; i < warmup; ++i) o.push_back(F(i));
    for (std::int32_t j = 0; j < m - warmup; ++j) {
        o.push_back(F(warmup + j));
        o.push_back(B(j));
        pending_w.push_back(j);
        if (std::int32_t(pending_w.size()) > delay) {
            o.push_back(W(pending_w.front()));
            pending_w.pop_front();
        }
    }
    for (std::int32_t j = m - warmup; j < m; ++j) {
        o.push_back(B(j));
        pending_w.push_back(j);
        o.push_back(W(pending_w.front()));
        pending_w.pop_front();
    }
    for (auto j : pending_w) o.push_back(W(j));
    return o;
}

// Places the sends and receives around a compute order: a receive right before the action
// that needs remote data, a send right after the action that produces it.
std::vector<Action> with_communication(const Schedule& s, std::int32_t rank, const Order& order) {
    std::vector<Action> actions;
    actions.reserve(order.size() * 2);
    const std::int32_t last = s.virtual_stages() - 1;
    for (const Action& a : order) {
        const std::int32_t vs = s.virtual_stage(rank, a.chunk);
        if (a.kind == ActionKind::forward && vs > 0 && s.rank_of(vs - 1) != rank)
            actions.push_back(
                {ActionKind::recv_activation, a.microbatch, a.chunk, s.rank_of(vs - 1)});
        if (a.kind == ActionKind::backward_input && vs < last && s.rank_of(vs + 1) != rank)
            actions.push_back(
                {ActionKind::recv_gradient, a.microbatch, a.chunk, s.rank_of(vs + 1)});
        actions.push_back(a);
        if (a.kind == ActionKind::forward && vs < last && s.rank_of(vs + 1) != rank)
            actions.push_back(
                {ActionKind::send_activation, a.microbatch, a.chunk, s.rank_of(vs + 1)});
        // The input gradient leaves after B under zero-bubble schedules. The others run one
        // fused backward (autograd interleaves dgrad and wgrad layer by layer, so a stage's
        // input gradient is ready only at the end): it leaves after the W that follows B.
        const ActionKind sends_gradient = s.kind == ScheduleKind::zero_bubble_h1
                                              ? ActionKind::backward_input
                                              : ActionKind::backward_weight;
        if (a.kind == sends_gradient && vs > 0 && s.rank_of(vs - 1) != rank)
            actions.push_back(
                {ActionKind::send_gradient, a.microbatch, a.chunk, s.rank_of(vs - 1)});
    }
    return actions;
}

} // namespace

EventKind to_event_kind(ActionKind k) {
    switch (k) {
    case ActionKind::forward:
        return EventKind::forward;
    case ActionKind::backward_input:
        return EventKind::backward_input;
    case ActionKind::backward_weight:
        return EventKind::backward_weight;
    case ActionKind::send_activation:
        return EventKind::send_activation;
    case ActionKind::recv_activation:
        return EventKind::recv_activation;
    case ActionKind::send_gradient:
        return EventKind::send_gradient;
    case ActionKind::recv_gradient:
        return EventKind::recv_gradient;
    }
    return EventKind::forward;
}

std::string to_string(const Action& a) {
    std::string s = std::string(kActionKindNames[int(a.kind)]) + "(mb " +
                    std::to_string(a.microbatch) + ", chunk " + std::to_string(a.chunk);
    if (a.peer >= 0) s += ", peer " + std::to_string(a.peer);
    return s + ")";
}

Schedule make_schedule(ScheduleKind kind, std::int32_t p, std::int32_t v, std::int32_t m) {
    if (p < 1) throw SpecError("parallel.pp", "must be a positive integer");
    if (v < 1) throw SpecError("parallel.vpp", "must be a positive integer");
    if (m < 1) throw SpecError("training.global_batch_size", "gives no micro-batch");
    if (kind == ScheduleKind::interleaved_1f1b) {
        if (m % p != 0)
            throw SpecError("training.global_batch_size",
                            "interleaved-1f1b needs micro-batches (" + std::to_string(m) +
                                ") divisible by pp = " + std::to_string(p));
    } else if (v != 1) {
        throw SpecError("parallel.vpp", "virtual stages need schedule \"interleaved-1f1b\"");
    }
    Schedule s{kind, p, v, m, {}};
    s.ranks.resize(std::size_t(p));
    for (std::int32_t r = 0; r < p; ++r) {
        Order order;
        switch (kind) {
        case ScheduleKind::gpipe:
            order = gpipe(p, r, m);
            break;
        case ScheduleKind::one_f_one_b:
            order = one_f_one_b(p, r, m);
            break;
        case ScheduleKind::interleaved_1f1b:
            order = interleaved(p, r, v, m);
            break;
        case ScheduleKind::zero_bubble_h1:
            order = zero_bubble_h1(p, r, m);
            break;
        }
        s.ranks[std::size_t(r)] = with_communication(s, r, order);
    }
    return s;
}

bool fuses_backward(const Schedule& s, std::int32_t rank, std::size_t index) {
    const std::vector<Action>& actions = s.ranks.at(std::size_t(rank));
    if (index + 1 >= actions.size()) return false;
    const Action& b = actions[index];
    const Action& w = actions[index + 1];
    return b.kind == ActionKind::backward_input && w.kind == ActionKind::backward_weight &&
           w.microbatch == b.microbatch && w.chunk == b.chunk;
}

namespace {

// `a` can be no higher a peak than `b`: as many or fewer pairs of every chunk, and a backward
// at that moment only if `b` has the same one.
bool dominated(const HeldPairs& a, const HeldPairs& b) {
    if (a.in_backward >= 0 && a.in_backward != b.in_backward) return false;
    for (std::size_t c = 0; c < a.until_backward_input.size(); ++c)
        if (a.until_backward_input[c] > b.until_backward_input[c] ||
            a.until_backward_weight[c] > b.until_backward_weight[c])
            return false;
    return true;
}

// Adds `moment` to the moments no other dominates (steady states repeat, so few remain).
void keep_if_undominated(std::vector<HeldPairs>& kept, const HeldPairs& moment) {
    for (const HeldPairs& k : kept)
        if (dominated(moment, k)) return;
    std::erase_if(kept, [&](const HeldPairs& k) { return dominated(k, moment); });
    kept.push_back(moment);
}

} // namespace

InFlight max_in_flight(const Schedule& s, std::int32_t rank) {
    InFlight peak;
    HeldPairs held;
    held.until_backward_input.assign(std::size_t(s.chunks), 0);
    held.until_backward_weight.assign(std::size_t(s.chunks), 0);
    std::int32_t until_b = 0, until_w = 0;
    // The held state after the latest F, kept only if a W lowers it before the next B (which
    // otherwise holds as much, and more).
    bool after_forward = false;
    const std::vector<Action>& actions = s.ranks.at(std::size_t(rank));
    for (std::size_t i = 0; i < actions.size(); ++i) {
        const Action& a = actions[i];
        const std::size_t c = std::size_t(a.chunk);
        if (a.kind == ActionKind::forward) {
            ++until_b;
            ++until_w;
            ++held.until_backward_input[c];
            after_forward = true;
        } else if (a.kind == ActionKind::backward_input) {
            peak.fused_backward = peak.fused_backward && fuses_backward(s, rank, i);
            held.in_backward = a.chunk; // the pair is still whole while its B runs
            keep_if_undominated(peak.peaks, held);
            held.in_backward = -1;
            after_forward = false;
            --until_b;
            --held.until_backward_input[c];
            ++held.until_backward_weight[c];
        } else if (a.kind == ActionKind::backward_weight) {
            if (after_forward) keep_if_undominated(peak.peaks, held);
            after_forward = false;
            --until_w;
            --held.until_backward_weight[c];
        }
        peak.until_backward_input = std::max(peak.until_backward_input, until_b);
        peak.until_backward_weight = std::max(peak.until_backward_weight, until_w);
    }
    if (after_forward) keep_if_undominated(peak.peaks, held); // forward-only orders
    return peak;
}

} // namespace trident::core
