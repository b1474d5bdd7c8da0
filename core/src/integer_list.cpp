#include "trident/core/integer_list.h"

#include "trident/core/spec_error.h"

#include <algorithm>
#include <cstdio>

namespace trident::core {

// "8", "2,4,8" or "1-8" (every integer in the range; impossible values are rejected with a
// reason like any other layout).
std::vector<std::int64_t> parse_integer_list(const std::string& text, const std::string& field) {
    std::vector<std::int64_t> values;
    if (text.empty()) return values;
    std::size_t start = 0;
    while (start <= text.size()) {
        const std::size_t comma = std::min(text.find(',', start), text.size());
        const std::string item = text.substr(start, comma - start);
        long long a = 0, b = 0;
        char tail = 0;
        if (std::sscanf(item.c_str(), "%lld-%lld%c", &a, &b, &tail) == 2 && a >= 1 && b >= a &&
            b - a < 100000) {
            for (long long v = a; v <= b; ++v) values.push_back(v);
        } else if (std::sscanf(item.c_str(), "%lld%c", &a, &tail) == 1 && a >= 1) {
            values.push_back(a);
        } else {
            throw SpecError(field, "expected positive integers like 8, 2,4,8 or 1-8, got \"" +
                                       text + "\"");
        }
        start = comma + 1;
    }
    return values;
}

} // namespace trident::core
