// Compute orders of ZB-V, DualPipe and DualPipeV: two model chunks per pipeline rank.
#include "schedule_orders.h"
#include "trident/core/internal_error.h"

#include <algorithm>
#include <array>
#include <deque>

namespace trident::core::orders {
namespace {

// One rank's order, written pass by pass: forwards and backwards name a chunk and take its
// next micro-batch; a zero-bubble backward (B alone) queues its W, which `weight` runs first
// in, first out; any other backward runs fused with its W at once.
class OrderWriter {
public:
    // `swap`: the rank's phases name its chunks the other way round (DualPipe's second half
    // of the ranks); `copy_offset`: the first micro-batch of copy 1 (DualPipe), else 0.
    OrderWriter(bool swap, std::int32_t copy_offset) : swap_(swap), copy_offset_(copy_offset) {}

    void forward(std::int32_t phase) {
        const std::int32_t c = chunk(phase);
        order_.push_back({ActionKind::forward, microbatch(c, forwards_[c]++), c, -1});
    }
    // DualPipe's overlapped F&B chunk: a forward of one phase, then a full backward of the
    // other (each one's output leaves as soon as it is computed).
    void forward_backward(std::int32_t forward_phase, std::int32_t backward_phase) {
        forward(forward_phase);
        backward(backward_phase, false);
    }
    void backward(std::int32_t phase, bool zero_bubble) {
        const std::int32_t c = chunk(phase);
        const Action b{ActionKind::backward_input, microbatch(c, backwards_[c]++), c, -1};
        push(b);
        const Action w{ActionKind::backward_weight, b.microbatch, c, -1};
        if (zero_bubble)
            pending_weight_.push_back(w);
        else
            push(w);
    }
    void weight() {
        if (pending_weight_.empty()) return;
        push(pending_weight_.front());
        pending_weight_.pop_front();
    }
    Order take() {
        if (!pending_weight_.empty())
            throw InternalError("two-chunk schedule left " +
                                std::to_string(pending_weight_.size()) + " weight passes unrun");
        return std::move(order_);
    }

private:
    void push(const Action& a) { order_.push_back(a); }
    std::int32_t chunk(std::int32_t phase) const { return phase ^ std::int32_t(swap_); }
    std::int32_t microbatch(std::int32_t c, std::int32_t index) const {
        return c * copy_offset_ + index;
    }
    bool swap_;
    std::int32_t copy_offset_;
    std::array<std::int32_t, 2> forwards_{}, backwards_{};
    std::deque<Action> pending_weight_;
    Order order_;
};

} // namespace

// The order PyTorch's ScheduleZBVZeroBubble builds from the paper's figure: warm-up forwards
// down the V, a steady state of F·B·W on each chunk in turn, a cool-down of backwards whose
// W's fill the drain. Generated for at least 2p − 1 micro-batches (what fills the V); with
// fewer, the passes of the missing micro-batches are left out.
Order zero_bubble_v(std::int32_t p, std::int32_t r, std::int32_t m) {
    const std::int32_t n = std::max(2 * p - 1, m);
    std::array<std::int32_t, 2> f{}, b{}, w{};
    Order o;
    const auto pass = [&](ActionKind kind, std::int32_t c, std::int32_t& counter) {
        if (counter < m) o.push_back({kind, counter, c, -1});
        ++counter;
    };
    const auto backward_and_weight = [&](std::int32_t c) {
        pass(ActionKind::backward_input, c, b[c]);
        pass(ActionKind::backward_weight, c, w[c]);
    };
    for (std::int32_t i = 0; i < 2 * (p - r) - 1; ++i) pass(ActionKind::forward, 0, f[0]);
    for (std::int32_t i = 0; i < r; ++i) {
        pass(ActionKind::forward, 1, f[1]);
        pass(ActionKind::forward, 0, f[0]);
    }
    for (std::int32_t i = 0; i < p - r; ++i) {
        pass(ActionKind::forward, 1, f[1]);
        backward_and_weight(1);
    }
    while (f[1] < f[0] || f[0] < n) {
        if (f[0] < n) pass(ActionKind::forward, 0, f[0]);
        backward_and_weight(0);
        pass(ActionKind::forward, 1, f[1]);
        backward_and_weight(1);
    }
    for (std::int32_t i = 0; i < r; ++i) {
        pass(ActionKind::backward_input, 0, b[0]);
        pass(ActionKind::backward_input, 1, b[1]);
    }
    for (std::int32_t i = 0; i < p - r; ++i) {
        pass(ActionKind::backward_input, 0, b[0]);
        pass(ActionKind::backward_weight, 0, w[0]);
    }
    while (w[1] < b[1]) pass(ActionKind::backward_weight, 1, w[1]);
    while (w[0] < b[0]) pass(ActionKind::backward_weight, 0, w[0]);
    return o;
}

// DualPipe on p ranks is two mirrored DualPipeV's of p/2 ranks: rank r of the first half and
// rank p − 1 − r of the second run the same steps ("half rank" min(r, p − 1 − r)), phase 0
// being the direction that starts at their end. Step names are the reference's: F0 is a
// forward of phase 0, B1 a backward of phase 1, W a queued weight pass.
Order dualpipe(ScheduleKind kind, std::int32_t p, std::int32_t r, std::int32_t m) {
    const bool two_copies = kind == ScheduleKind::dualpipe;
    const std::int32_t ranks = two_copies ? p / 2 : p;
    const std::int32_t half = two_copies ? std::min(r, p - 1 - r) : r;
    const std::int32_t per_phase = two_copies ? m / 2 : m;
    OrderWriter o(two_copies && r >= p / 2, two_copies ? m / 2 : 0);
    const std::int32_t before = ranks - half - 1;               // ranks further from this one's end
    for (std::int32_t i = 0; i < 2 * before; ++i) o.forward(0); // 1: F0
    for (std::int32_t i = 0; i < half + 1; ++i) {               // 2: F0 F1
        o.forward(0);
        o.forward(1);
    }
    for (std::int32_t i = 0; i < before; ++i) { // 3: B1 W F1, zero bubble
        o.backward(1, true);
        o.weight();
        o.forward(1);
    }
    for (std::int32_t i = 0; i < per_phase - 2 * ranks + half + 1; ++i) { // 4: F0&B1 F1&B0
        o.forward_backward(0, 1);
        o.forward_backward(1, 0);
    }
    for (std::int32_t i = 0; i < before; ++i) { // 5: B1 F1&B0
        o.backward(1, false);
        o.forward_backward(1, 0);
    }
    const std::int32_t drain = half + 1; // 6: B1 B0, the second half zero bubble
    bool zero_bubble = false;
    for (std::int32_t i = 0; i < drain; ++i) {
        if (i == drain / 2 && half % 2 == 1) zero_bubble = true;
        o.backward(1, zero_bubble);
        if (i == drain / 2 && half % 2 == 0) zero_bubble = true;
        o.backward(0, zero_bubble);
    }
    for (std::int32_t i = 0; i < before; ++i) { // 7: W B0, zero bubble
        o.weight();
        o.backward(0, true);
    }
    for (std::int32_t i = 0; i < half + 1; ++i) o.weight(); // 8: W
    return o.take();
}

} // namespace trident::core::orders
