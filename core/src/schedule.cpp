#include "trident/core/schedule.h"

#include "schedule_orders.h"
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

// Whether the schedule sends every input gradient as soon as its B ends, W or not behind it
// (the zero-bubble schedules' point: the chain of B's upstream never waits for a W).
bool splits_backward(ScheduleKind kind) {
    return kind == ScheduleKind::zero_bubble_h1 || kind == ScheduleKind::zero_bubble_v;
}

// The compute actions that run as one unit from `i`: a B fused with its W (outside the
// zero-bubble schedules), or the action alone.
std::size_t unit_end(const Schedule& s, const Order& o, std::size_t i) {
    const bool weight_next = i + 1 < o.size() && o[i].kind == ActionKind::backward_input &&
                             o[i + 1].kind == ActionKind::backward_weight &&
                             o[i + 1].microbatch == o[i].microbatch && o[i + 1].chunk == o[i].chunk;
    return !splits_backward(s.kind) && weight_next ? i + 2 : i + 1;
}

// Places the sends and receives around a compute order: the receives a unit of compute needs
// right before it, the sends of what it produced right after it (an activation after its F;
// an input gradient after its B, or after the fused W: autograd interleaves dgrad and wgrad
// layer by layer, so a fused backward's input gradient is ready only at its end). The
// neighbours are those of the micro-batch's own path, wherever the placement puts them.
std::vector<Action> with_communication(const Schedule& s, std::int32_t rank, const Order& o) {
    std::vector<Action> actions;
    actions.reserve(o.size() * 2);
    const std::int32_t last = s.virtual_stages() - 1;
    const auto neighbour = [&](const Action& a, std::int32_t step) {
        const std::int32_t vs = s.virtual_stage(rank, a.chunk) + step;
        return vs >= 0 && vs <= last ? s.rank_of(a.microbatch, vs) : rank;
    };
    for (std::size_t i = 0, end = 0; i < o.size(); i = end) {
        end = unit_end(s, o, i);
        for (std::size_t j = i; j < end; ++j) {
            const Action& a = o[j];
            if (a.kind == ActionKind::forward && neighbour(a, -1) != rank)
                actions.push_back(
                    {ActionKind::recv_activation, a.microbatch, a.chunk, neighbour(a, -1)});
            if (a.kind == ActionKind::backward_input && neighbour(a, +1) != rank)
                actions.push_back(
                    {ActionKind::recv_gradient, a.microbatch, a.chunk, neighbour(a, +1)});
        }
        actions.insert(actions.end(), o.begin() + std::ptrdiff_t(i),
                       o.begin() + std::ptrdiff_t(end));
        for (std::size_t j = i; j < end; ++j) {
            const Action& a = o[j];
            if (a.kind == ActionKind::forward && neighbour(a, +1) != rank)
                actions.push_back(
                    {ActionKind::send_activation, a.microbatch, a.chunk, neighbour(a, +1)});
            if (a.kind == ActionKind::backward_input && neighbour(a, -1) != rank)
                actions.push_back(
                    {ActionKind::send_gradient, a.microbatch, a.chunk, neighbour(a, -1)});
        }
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

void validate_schedule_shape(ScheduleKind kind, std::int64_t p, std::int64_t v) {
    const auto s = [](std::int64_t x) { return std::to_string(x); };
    const std::string name(kScheduleNames[std::size_t(kind)]);
    if (p < 1) throw SpecError("parallel.pp", "must be a positive integer");
    if (v < 1) throw SpecError("parallel.vpp", "must be a positive integer");
    if (holds_two_chunks(kind) && v != 2)
        throw SpecError("parallel.vpp", "schedule \"" + name +
                                            "\" holds 2 model chunks per rank; leave vpp out or "
                                            "give 2, got " +
                                            s(v));
    if (!holds_two_chunks(kind) && kind != ScheduleKind::interleaved_1f1b && v != 1)
        throw SpecError("parallel.vpp", "virtual stages need schedule \"interleaved-1f1b\"");
    if (kind == ScheduleKind::dualpipe && p % 2 != 0)
        throw SpecError("parallel.pp", "schedule \"dualpipe\" needs an even pp (its two "
                                       "directions meet in the middle), got " +
                                           s(p));
}

void validate_schedule(ScheduleKind kind, std::int64_t p, std::int64_t v, std::int64_t m) {
    const auto s = [](std::int64_t x) { return std::to_string(x); };
    const std::string name(kScheduleNames[std::size_t(kind)]);
    validate_schedule_shape(kind, p, v);
    if (m < 1) throw SpecError("training.global_batch_size", "gives no micro-batch");
    if (kind == ScheduleKind::interleaved_1f1b && m % p != 0)
        throw SpecError("training.global_batch_size",
                        "interleaved-1f1b needs micro-batches per step (" + s(m) +
                            ") divisible by pp = " + s(p) + " (Megatron's rule)");
    if (kind == ScheduleKind::dualpipe && m % 2 != 0)
        throw SpecError("training.global_batch_size",
                        "dualpipe needs an even number of micro-batches (half go each way), got " +
                            s(m));
    if ((kind == ScheduleKind::dualpipe || kind == ScheduleKind::dualpipev) && m < 2 * p)
        throw SpecError("training.global_batch_size",
                        name + " needs at least 2·pp = " + s(2 * p) +
                            " micro-batches per step (DeepSeek's rule), got " + s(m));
}

namespace {

Order compute_order(ScheduleKind kind, std::int32_t p, std::int32_t r, std::int32_t v,
                    std::int32_t m) {
    switch (kind) {
    case ScheduleKind::gpipe:
        return gpipe(p, r, m);
    case ScheduleKind::one_f_one_b:
        return one_f_one_b(p, r, m);
    case ScheduleKind::interleaved_1f1b:
        return interleaved(p, r, v, m);
    case ScheduleKind::zero_bubble_h1:
        return zero_bubble_h1(p, r, m);
    case ScheduleKind::zero_bubble_v:
        return orders::zero_bubble_v(p, r, m);
    case ScheduleKind::dualpipe:
    case ScheduleKind::dualpipev:
        return orders::dualpipe(kind, p, r, m);
    }
    return {};
}

} // namespace

Schedule make_schedule(ScheduleKind kind, std::int32_t p, std::int32_t v, std::int32_t m) {
    validate_schedule(kind, p, v, m);
    Schedule s{kind, p, v, m, {}};
    s.ranks.resize(std::size_t(p));
    for (std::int32_t r = 0; r < p; ++r)
        s.ranks[std::size_t(r)] = with_communication(s, r, compute_order(kind, p, r, v, m));
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
