// The schedule walk both backends share: a recording implementation of the action bodies must
// see, on every pipeline rank, exactly that rank's actions of the schedule in order (and in
// evaluation exactly its forward subsequence), with the fused-backward flags, slot lifetimes
// and trace events the walk promises.
#include "../../executor/src/schedule_walk.h"
#include "trident/core/internal_error.h"

#include <gtest/gtest.h>
#include <set>
#include <tuple>

namespace trident::executor {
namespace {

using core::ActionKind;
using core::ScheduleKind;

struct RecordedSlot {
    std::int32_t id = -1; // set by its first action
    double bytes = 0.0;
};

class RecordingBodies final : public ActionBodies<RecordedSlot> {
public:
    std::vector<core::Action> seen;
    std::vector<bool> fused; // per seen action
    std::int32_t keep_only_calls = 0, wait_sends_calls = 0;
    std::set<std::pair<std::int32_t, std::int32_t>> fresh_slot_seen; // (mb, chunk) on first use

    void forward(const WalkAction& a, RecordedSlot& s) override { record(a, s, 1.0); }
    double backward_input(const WalkAction& a, RecordedSlot& s) override {
        record(a, s, 0.0);
        return a.fused ? 0.25 : 0.0;
    }
    void backward_weight(const WalkAction& a, RecordedSlot& s) override { record(a, s, 0.0); }
    void send_activation(const WalkAction& a, RecordedSlot& s) override { record(a, s, 0.0); }
    void recv_activation(const WalkAction& a, RecordedSlot& s) override { record(a, s, 0.0); }
    void send_gradient(const WalkAction& a, RecordedSlot& s) override { record(a, s, 0.0); }
    void recv_gradient(const WalkAction& a, RecordedSlot& s) override { record(a, s, 0.0); }
    // (micro-batch, chunk) of the giving and the taking slot of each in-memory hop.
    std::vector<std::pair<std::int32_t, std::int32_t>> activation_hops, gradient_hops;
    void hand_activation(RecordedSlot& from, RecordedSlot& to) override {
        EXPECT_GE(from.id, 0) << "handed from a slot that never ran";
        activation_hops.push_back({from.id, to.id});
    }
    void hand_gradient(RecordedSlot& from, RecordedSlot& to) override {
        EXPECT_GE(from.id, 0) << "handed from a slot that never ran";
        gradient_hops.push_back({from.id, to.id});
    }
    void keep_only_input_gradient(RecordedSlot& s) override {
        ++keep_only_calls;
        s.bytes = 0.0;
    }
    void wait_sends() override { ++wait_sends_calls; }
    double held_bytes(const RecordedSlot& s) const override { return s.bytes; }
    double p2p_bytes(std::int32_t chunk) const override { return 100.0 + chunk; }

private:
    void record(const WalkAction& a, RecordedSlot& s, double add_bytes) {
        seen.push_back(a.action);
        fused.push_back(a.fused);
        if (s.id < 0) {
            s.id = a.action.microbatch * 1000 + a.action.chunk;
            fresh_slot_seen.insert({a.action.microbatch, a.action.chunk});
        }
        EXPECT_EQ(s.id, a.action.microbatch * 1000 + a.action.chunk) << "another slot's state";
        s.bytes += add_bytes;
    }
};

std::vector<std::tuple<ScheduleKind, std::int32_t, std::int32_t, std::int32_t>> layouts() {
    std::vector<std::tuple<ScheduleKind, std::int32_t, std::int32_t, std::int32_t>> out;
    for (auto kind : {ScheduleKind::gpipe, ScheduleKind::one_f_one_b, ScheduleKind::zero_bubble_h1})
        for (std::int32_t p : {1, 2, 4})
            for (std::int32_t m : {1, 3, 8}) out.emplace_back(kind, p, 1, m);
    for (std::int32_t p : {2, 4})
        for (std::int32_t v : {2, 3}) out.emplace_back(ScheduleKind::interleaved_1f1b, p, v, 2 * p);
    for (auto kind : {ScheduleKind::zero_bubble_v, ScheduleKind::dualpipev, ScheduleKind::dualpipe})
        for (std::int32_t p : {2, 4})
            for (std::int32_t m : {2 * p, 3 * p + 2}) out.emplace_back(kind, p, 2, m);
    return out;
}

TEST(ScheduleWalk, EveryRankSeesExactlyItsActionsInOrder) {
    for (const auto& [kind, p, v, m] : layouts()) {
        const core::Schedule schedule = core::make_schedule(kind, p, v, m);
        for (std::int32_t r = 0; r < p; ++r) {
            const std::string where = std::string(core::kScheduleNames[std::size_t(kind)]) + " p " +
                                      std::to_string(p) + " v " + std::to_string(v) + " m " +
                                      std::to_string(m) + " rank " + std::to_string(r);
            const ScheduleWalk walk(schedule, r);
            RecordingBodies bodies;
            std::vector<core::TraceEvent> events;
            HostClockTracer tracer(events);
            const WalkResult result = walk.run(bodies, {false, &tracer, 7});
            const auto& expected = schedule.ranks[std::size_t(r)];
            ASSERT_EQ(bodies.seen, expected) << where;
            std::int32_t weights = 0;
            for (std::size_t i = 0; i < expected.size(); ++i) {
                const bool fuses = expected[i].kind == ActionKind::backward_input
                                       ? core::fuses_backward(schedule, r, i)
                                   : expected[i].kind == ActionKind::backward_weight
                                       ? i > 0 && core::fuses_backward(schedule, r, i - 1)
                                       : false;
                EXPECT_EQ(bodies.fused[i], fuses) << where << " action " << i;
                weights += expected[i].kind == ActionKind::backward_weight ? 1 : 0;
            }
            EXPECT_EQ(bodies.keep_only_calls, weights) << where;
            EXPECT_EQ(bodies.wait_sends_calls, 1) << where;
            // Every forward added a byte to its own slot and W released it: the peak is the most
            // (micro-batch, chunk) pairs this rank holds between F and W.
            EXPECT_EQ(result.peak_activation_bytes,
                      double(core::max_in_flight(schedule, r).until_backward_weight))
                << where;
            // One event per action, on the rank and stage given, with the schedule's labels.
            ASSERT_EQ(events.size(), expected.size()) << where;
            for (std::size_t i = 0; i < events.size(); ++i) {
                const core::TraceEvent& e = events[i];
                EXPECT_EQ(e.rank, 7);
                EXPECT_EQ(e.stage, r);
                EXPECT_EQ(e.kind, core::to_event_kind(expected[i].kind));
                EXPECT_EQ(e.microbatch, expected[i].microbatch);
                EXPECT_EQ(e.chunk, expected[i].chunk);
                EXPECT_EQ(e.bytes, core::is_compute(expected[i].kind) ? 0.0 : 100.0 + e.chunk);
                EXPECT_LE(e.start_s, e.end_s);
            }
        }
    }
}

TEST(ScheduleWalk, EvaluationWalksTheForwardSubsequence) {
    for (const auto& [kind, p, v, m] : layouts()) {
        const core::Schedule schedule = core::make_schedule(kind, p, v, m);
        for (std::int32_t r = 0; r < p; ++r) {
            RecordingBodies bodies;
            ScheduleWalk(schedule, r).run(bodies, {true, nullptr, 0});
            std::vector<core::Action> forwards;
            for (const core::Action& a : schedule.ranks[std::size_t(r)])
                if (a.kind == ActionKind::forward || a.kind == ActionKind::send_activation ||
                    a.kind == ActionKind::recv_activation)
                    forwards.push_back(a);
            EXPECT_EQ(bodies.seen, forwards) << "rank " << r;
            EXPECT_EQ(bodies.keep_only_calls, 0);
        }
    }
}

TEST(ScheduleWalk, FusedBackwardIsTracedAsBThenW) {
    const core::Schedule schedule = core::make_schedule(ScheduleKind::one_f_one_b, 1, 1, 2);
    RecordingBodies bodies; // reports 0.25 s of W inside every fused B
    std::vector<core::TraceEvent> events;
    HostClockTracer tracer(events);
    ScheduleWalk(schedule, 0).run(bodies, {false, &tracer, 0});
    for (std::size_t i = 0; i + 1 < events.size(); ++i) {
        if (events[i].kind != core::EventKind::backward_input) continue;
        ASSERT_EQ(events[i + 1].kind, core::EventKind::backward_weight);
        EXPECT_DOUBLE_EQ(events[i + 1].start_s, events[i].end_s);
        EXPECT_DOUBLE_EQ(events[i + 1].end_s - events[i + 1].start_s, 0.25);
    }
}

TEST(ScheduleWalk, RefusesAMalformedScheduleBeforeRunningIt) {
    core::Schedule broken = core::make_schedule(ScheduleKind::one_f_one_b, 2, 1, 2);
    // Rank 1 never receives micro-batch 1's activation: rank 0's send would go unmatched.
    auto& rank1 = broken.ranks[1];
    for (auto it = rank1.begin(); it != rank1.end(); ++it)
        if (it->kind == ActionKind::recv_activation && it->microbatch == 1) {
            rank1.erase(it);
            break;
        }
    EXPECT_THROW(ScheduleWalk(broken, 0), core::InternalError);
    EXPECT_THROW(ScheduleWalk(core::make_schedule(ScheduleKind::gpipe, 2, 1, 2), 2),
                 core::InternalError);
}

// The turn of a V (stage p − 1 to stage p, both on the last pipeline rank) has no send or
// receive: the walk hands chunk 0's output to chunk 1 before its F and chunk 1's input gradient
// to chunk 0 before its B, once per micro-batch; no other rank and no DualPipe rank hands over.
TEST(ScheduleWalk, TheTurnOfAVIsHandedOverInMemory) {
    for (auto kind : {ScheduleKind::zero_bubble_v, ScheduleKind::dualpipev, ScheduleKind::dualpipe})
        for (std::int32_t p : {1, 2, 4}) {
            if (p == 1 && kind == ScheduleKind::dualpipe) continue; // needs an even p
            const std::int32_t m = 2 * std::max(p, 2);
            const core::Schedule schedule = core::make_schedule(kind, p, 2, m);
            for (std::int32_t r = 0; r < p; ++r) {
                RecordingBodies bodies;
                ScheduleWalk(schedule, r).run(bodies, {false, nullptr, 0});
                const bool turns = kind != ScheduleKind::dualpipe && r == p - 1;
                const std::string where = core::to_string(kind) + " p " + std::to_string(p) +
                                          " rank " + std::to_string(r);
                ASSERT_EQ(bodies.activation_hops.size(), turns ? std::size_t(m) : 0u) << where;
                ASSERT_EQ(bodies.gradient_hops.size(), turns ? std::size_t(m) : 0u) << where;
                for (const auto& [from, to] : bodies.activation_hops) {
                    EXPECT_EQ(from % 1000, 0) << where; // chunk 0 gives
                    EXPECT_EQ(to, -1) << where;         // to chunk 1's fresh slot, before its F
                }
                for (const auto& [from, to] : bodies.gradient_hops) {
                    EXPECT_EQ(from % 1000, 1) << where;
                    EXPECT_EQ(to, from - 1) << where; // the same micro-batch's chunk 0
                }
            }
        }
}

} // namespace
} // namespace trident::executor
