#pragma once
// Writes a file so that readers see either the old content or the whole new one: write to a
// temporary beside it, flush, then rename over. A failure leaves the old file untouched.
#include <string>
#include <string_view>

namespace trident::core {

// Throws SpecError{field, reason} when the file cannot be written.
void write_file_atomically(const std::string& path, std::string_view text,
                           const std::string& field);

} // namespace trident::core
