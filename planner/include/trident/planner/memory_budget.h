#pragma once
// The per-device memory budget as users write it, for `trident plan --memory-budget` and the
// GUI's planner: "70GiB", "80GB", "75e9" (bytes), "0.9" (a fraction of the device's memory)
// or "90%".
#include <string>

namespace trident::planner {

// The default: the whole device. The memory model counts what the device holds beyond the
// tensors (the allocator's reserve, the CUDA context, NCCL's and DeepEP's buffers:
// simulator/device_memory.h), so no headroom is set aside a second time.
inline constexpr const char* kDefaultMemoryBudget = "100%";

// Throws SpecError(field, …) for anything else (an empty text, another unit, trailing words).
double parse_memory_budget(const std::string& text, double capacity_bytes,
                           const std::string& field);

} // namespace trident::planner
