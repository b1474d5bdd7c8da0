#pragma once
// SpecError: the one exception type for bad input. It names the offending field (a dotted
// path such as "parallel.tp" or "model.moe.top_k") and the rule it broke; `main` turns it into
// one line on stderr and exit code 2.
#include <stdexcept>
#include <string>

namespace trident::core {

class SpecError : public std::runtime_error {
public:
    SpecError(std::string field, std::string reason)
        : std::runtime_error(field + ": " + reason), field_(std::move(field)),
          reason_(std::move(reason)) {}

    const std::string& field() const { return field_; }
    const std::string& reason() const { return reason_; }

private:
    std::string field_;
    std::string reason_;
};

// A layout that does not fit in device memory: bad input as well, with its own exit code so a
// script can tell "does not fit" from "malformed" (simulate and validate; --allow-oom waives it).
class OutOfMemoryError : public SpecError {
public:
    using SpecError::SpecError;
};
inline constexpr int kOutOfMemoryExitCode = 3;

} // namespace trident::core
