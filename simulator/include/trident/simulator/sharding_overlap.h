#pragma once
// How much of ZeRO-2/3's per-micro-batch communication a pass leaves exposed. FSDP runs its
// all-gathers and reduce-scatters on a stream of their own beside the compute, unit (layer) by
// unit: a unit's parameters must be gathered before it computes, its gradients are
// reduce-scattered once it has, and only `prefetch` units may be gathered ahead of the one
// computing (their buffers are freed as units finish). The stream serves requests in the order
// they are issued.
#include <cstdint>
#include <vector>

namespace trident::simulator {

struct StreamOverlap {
    double exposed_s = 0.0; // the pass's time beyond its compute
    double stream_s = 0.0;  // the stream's busy time, hidden or not
};

// Units in the order the pass computes them: `gather_s[i]` before unit i (0: none),
// `compute_s[i]` its compute, `scatter_s[i]` after it (0: none). The last unit's scatter ends
// the pass: its tail is exposed.
StreamOverlap stream_overlap(const std::vector<double>& gather_s,
                             const std::vector<double>& compute_s,
                             const std::vector<double>& scatter_s, std::int64_t prefetch);

} // namespace trident::simulator
