#pragma once
// Reading a profile's table rows (shared by the parts of Profile::from_json).
#include "trident/core/json_io.h"

#include <string>
#include <string_view>
#include <vector>

namespace trident::core::detail {

// The non-empty array at `key`.
const Json& array_field(ObjectReader& r, std::string_view key);
// A row of `n` finite non-negative numbers.
std::vector<double> row(const Json& v, std::size_t n, const std::string& field);

} // namespace trident::core::detail
