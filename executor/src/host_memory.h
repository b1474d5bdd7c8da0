#pragma once
// This machine's memory as /proc/meminfo reports it.
#include <cstddef>

namespace trident::executor {

// The bytes of the /proc/meminfo line `key` ("MemTotal", "MemAvailable"); −1 when there is no
// such line (or no /proc).
double meminfo_bytes(const char* key);

// Zeroes data[0, n) and offers its whole pages back to the kernel (madvise MADV_FREE: taken
// when memory runs short, reading as zeros then too), so what a step no longer holds —
// ZeRO-2's reduced gradients, ZeRO-3's other ranks' parameters — is the machine's to reclaim.
void release_pages(float* data, std::size_t n);

// Offers data[0, n)'s whole pages back as release_pages does, without zeroing: for what is
// overwritten whole before it is read again (ZeRO-3's gathered parameters), so it reads
// either as it was or as zeros until then.
void offer_pages(float* data, std::size_t n);

} // namespace trident::executor
