#pragma once
// The compute orders of the schedules that hold two model chunks per rank, one rank at a time
// (make_schedule places the sends and receives around them).
#include "trident/core/schedule.h"

#include <vector>

namespace trident::core::orders {

using Order = std::vector<Action>; // compute actions only

// ZB-V (Qi et al. 2024, "Zero Bubble Pipeline Parallelism" §6 and "Pipeline Parallelism with
// Controllable Memory"): V placement, each chunk half a 1F1B stage.
Order zero_bubble_v(std::int32_t p, std::int32_t r, std::int32_t m);

// DualPipe (DeepSeek-AI 2024) and DualPipeV (its V-shaped, one-copy form): the eight steps of
// DeepSeek's reference implementation (github.com/deepseek-ai/DualPipe).
Order dualpipe(ScheduleKind kind, std::int32_t p, std::int32_t r, std::int32_t m);

} // namespace trident::core::orders
