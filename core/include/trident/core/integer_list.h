#pragma once
// Lists of positive integers as people type them on a command line or in a form: "8",
// "2,4,8" or "1-8" (every integer in the range).
#include <cstdint>
#include <string>
#include <vector>

namespace trident::core {

// Empty text: an empty list. SpecError(field) for anything else that is not such a list.
std::vector<std::int64_t> parse_integer_list(const std::string& text, const std::string& field);

} // namespace trident::core
