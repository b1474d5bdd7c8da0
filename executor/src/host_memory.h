#pragma once
// This machine's memory as /proc/meminfo reports it.
#include <cstddef>

namespace trident::executor {

// The bytes of the /proc/meminfo line `key` ("MemTotal", "MemAvailable"); −1 when there is no
// such line (or no /proc).
double meminfo_bytes(const char* key);

// Zeroes data[0, n) and gives its whole pages back to the kernel (madvise MADV_DONTNEED: a
// private anonymous page reads as zeros when next touched), so what a step no longer holds is
// returned to the machine, not merely unused: ZeRO-2's reduced gradients, ZeRO-3's other ranks'
// parameters. The partial pages at either end are only zeroed.
void release_pages(float* data, std::size_t n);

} // namespace trident::executor
