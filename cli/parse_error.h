#pragma once
// CLI11's parse errors in Trident's one-line style, `FIELD: REASON`: "--mbs: At Most 1 required
// but received 2" becomes "--mbs: given 2 times; give it once", "Could not convert: --tp = abc"
// becomes "--tp: 'abc' is not an integer", and a missing or mistyped command names the
// commands there are, with the closest one.
#include <CLI/CLI.hpp>
#include <string>
#include <utility>

namespace trident::cli {

// The field and the reason for `error`, raised while `app` parsed `argv`.
std::pair<std::string, std::string>
describe_parse_error(const CLI::ParseError& error, const CLI::App& app, int argc, char** argv);

} // namespace trident::cli
