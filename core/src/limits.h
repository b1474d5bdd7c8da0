#pragma once
// Upper bounds on spec sizes. They are far above any real model or cluster and exist so that
// derived products (parameter counts, device counts) cannot overflow 64-bit integers.
#include <cstdint>

namespace trident::core::limits {

inline constexpr std::int64_t kMaxLayers = 100'000;
// Multi-token prediction depth (DeepSeek-V3 trains with 1; papers go up to 4).
inline constexpr std::int64_t kMaxMtpLayers = 16;
inline constexpr std::int64_t kMaxHidden = 1 << 20;
inline constexpr std::int64_t kMaxHeads = 1 << 16;
inline constexpr std::int64_t kMaxFfn = 1 << 24;
inline constexpr std::int64_t kMaxVocab = 1 << 27;
inline constexpr std::int64_t kMaxPositions = 1 << 27;
inline constexpr std::int64_t kMaxExperts = 1 << 16;
inline constexpr std::int64_t kMaxNodes = 1 << 20;
inline constexpr std::int64_t kMaxDevicesPerNode = 1 << 12;
inline constexpr std::int64_t kMaxDegree = 1 << 24;
inline constexpr std::int64_t kMaxBatch = std::int64_t{1} << 40;
inline constexpr std::int64_t kMaxIters = std::int64_t{1} << 40;
// Largest parameter count accepted (10^16: ten thousand trillion).
inline constexpr double kMaxParameters = 1.0e16;

} // namespace trident::core::limits
