#include "trident/core/dtype.h"

#include "trident/core/json_io.h"

namespace trident::core {

Dtype parse_dtype(const std::string& word, const std::string& field) {
    return static_cast<Dtype>(enum_index(word, kDtypeNames, field));
}

} // namespace trident::core
