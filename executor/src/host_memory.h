#pragma once
// This machine's memory as /proc/meminfo reports it.
namespace trident::executor {

// The bytes of the /proc/meminfo line `key` ("MemTotal", "MemAvailable"); −1 when there is no
// such line (or no /proc).
double meminfo_bytes(const char* key);

} // namespace trident::executor
