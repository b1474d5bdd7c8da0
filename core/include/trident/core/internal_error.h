#pragma once
// InternalError: a broken promise inside Trident — a generated schedule that does not check, a
// tensor table that disagrees with the parameter store, a bucket marked twice — never bad
// input (that is SpecError, naming the field). `main` reports it as a bug, exit code 70
// (EX_SOFTWARE), so a user can tell "I asked for something wrong" from "Trident is wrong".
#include <stdexcept>
#include <string>

namespace trident::core {

class InternalError : public std::logic_error {
public:
    explicit InternalError(const std::string& what) : std::logic_error(what) {}
};

inline constexpr int kInternalErrorExitCode = 70;

} // namespace trident::core
