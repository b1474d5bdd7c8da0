#pragma once
// The causal mask as the attention kernels' `visible` array: query t sees keys [0, t + 1).
#include <cstdint>
#include <vector>

namespace trident::kernels::cpu {

inline std::vector<std::int32_t> causal_visible(std::int64_t T) {
    std::vector<std::int32_t> v(static_cast<std::size_t>(T));
    for (std::int64_t t = 0; t < T; ++t) v[std::size_t(t)] = std::int32_t(t + 1);
    return v;
}

} // namespace trident::kernels::cpu
