#include "trident/core/json_io.h"

#include "trident/core/spec_error.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>
#include <vector>

namespace trident::core {
namespace {

std::string kind_of(const Json& v) {
    switch (v.type()) {
    case Json::value_t::null:
        return "null";
    case Json::value_t::boolean:
        return "a boolean";
    case Json::value_t::string:
        return "a string";
    case Json::value_t::array:
        return "an array";
    case Json::value_t::object:
        return "an object";
    case Json::value_t::number_float:
        return "a number";
    default:
        return "an integer";
    }
}

std::size_t edit_distance(std::string_view a, std::string_view b) {
    std::vector<std::size_t> row(b.size() + 1);
    for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
    for (std::size_t i = 1; i <= a.size(); ++i) {
        std::size_t diagonal = row[0];
        row[0] = i;
        for (std::size_t j = 1; j <= b.size(); ++j) {
            const std::size_t up = row[j];
            row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] != b[j - 1])});
            diagonal = up;
        }
    }
    return row[b.size()];
}

// nlohmann's "[json.exception.parse_error.101] parse error at line 3, column 1: syntax error
// while parsing value - unexpected end of input; expected …" without its id, its own
// position (ours counts the same way and is said once) and the boilerplate.
std::string parse_error_reason(std::string what) {
    if (const auto column = what.find(", column "); column != std::string::npos)
        if (const auto colon = what.find(": ", column); colon != std::string::npos)
            what = what.substr(colon + 2);
    for (const std::string_view boilerplate :
         {"syntax error while parsing value - ", "syntax error while parsing object key - ",
          "syntax error while parsing object separator - ", "syntax error while parsing object - ",
          "syntax error while parsing array - "})
        if (what.rfind(boilerplate, 0) == 0) {
            what = what.substr(boilerplate.size());
            break;
        }
    std::replace(what.begin(), what.end(), '\n', ' ');
    return what;
}

} // namespace

Json parse_json_text(std::string_view text, const std::string& source) {
    // A NUL byte is no text file's: say "binary", not "unexpected end of input" (nlohmann stops
    // reading at a NUL).
    if (const auto nul = text.find('\0'); nul != std::string_view::npos)
        throw SpecError(source, "is a binary file, not JSON (a NUL byte at offset " +
                                    std::to_string(nul) + ")");
    try {
        return Json::parse(text.begin(), text.end());
    } catch (const Json::parse_error& e) {
        // nlohmann reports a byte offset; users need line and column.
        const std::size_t offset = std::min<std::size_t>(e.byte == 0 ? 0 : e.byte - 1, text.size());
        std::size_t line = 1, column = 1;
        for (std::size_t i = 0; i < offset; ++i) {
            if (text[i] == '\n') {
                ++line;
                column = 1;
            } else {
                ++column;
            }
        }
        throw SpecError(source, "JSON syntax error at line " + std::to_string(line) + ", column " +
                                    std::to_string(column) + ": " + parse_error_reason(e.what()));
    } catch (const Json::out_of_range& e) {
        // A number too large for a double (1e400) is out of range, not a syntax error, and
        // nlohmann reports no position for it (found by the fuzzer).
        std::string what = e.what();
        if (auto at = what.find("] "); at != std::string::npos) what = what.substr(at + 2);
        throw SpecError(source, "JSON number out of range: " + what);
    }
}

Json read_json_file(const std::string& path, const std::string& field) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw SpecError(field, "cannot open file '" + path + "'");
    std::ostringstream buffer;
    buffer << in.rdbuf();
    if (in.bad()) throw SpecError(field, "cannot read file '" + path + "'");
    return parse_json_text(buffer.str(), path);
}

ObjectReader::ObjectReader(const Json& object, std::string path)
    : object_(object), path_(std::move(path)) {
    if (!object_.is_object())
        throw SpecError(path_, "must be a JSON object, got " + kind_of(object_));
}

std::string ObjectReader::field(std::string_view key) const {
    return path_.empty() ? std::string(key) : path_ + "." + std::string(key);
}

bool ObjectReader::has(std::string_view key) {
    asked_.emplace(key);
    return object_.find(std::string(key)) != object_.end();
}

const Json* ObjectReader::get(std::string_view key) {
    asked_.emplace(key);
    auto it = object_.find(std::string(key));
    if (it == object_.end()) return nullptr;
    read_.emplace(key);
    return &*it;
}

const Json& ObjectReader::require(std::string_view key) {
    const Json* v = get(key);
    if (v) return *v;
    // A missing key next to a near spelling of it (edit distance only; a longer real key such
    // as ffn_hidden_size must not pass for hidden_size): name the misspelt key.
    // Short keys (tp, pp, dp) are each other's near neighbours, so only longer ones qualify.
    if (key.size() >= 4)
        for (auto it = object_.begin(); it != object_.end(); ++it)
            if (!asked_.contains(it.key()) && edit_distance(it.key(), key) <= 2)
                throw SpecError(field(it.key()),
                                "unknown field (did you mean '" + std::string(key) + "'?)");
    throw SpecError(field(key), "missing (required field)");
}

std::int64_t as_integer(const Json& v, const std::string& field, std::int64_t min_value,
                        std::int64_t max_value) {
    std::int64_t value = 0;
    if (v.is_number_unsigned()) {
        if (v.get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX))
            throw SpecError(field, "is too large");
        value = static_cast<std::int64_t>(v.get<std::uint64_t>());
    } else if (v.is_number_integer()) {
        value = v.get<std::int64_t>();
    } else if (v.is_number_float()) {
        const double d = v.get<double>();
        if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.0e15)
            value = static_cast<std::int64_t>(d);
        else
            throw SpecError(field, "must be an integer, got " + v.dump());
    } else {
        throw SpecError(field, "must be an integer, got " + kind_of(v));
    }
    if (value < min_value) {
        if (min_value == 1)
            throw SpecError(field, "must be a positive integer, got " + std::to_string(value));
        throw SpecError(field, "must be at least " + std::to_string(min_value) + ", got " +
                                   std::to_string(value));
    }
    if (value > max_value)
        throw SpecError(field, "must be at most " + std::to_string(max_value) + ", got " +
                                   std::to_string(value));
    return value;
}

std::int64_t ObjectReader::integer(std::string_view key, std::int64_t min_value,
                                   std::int64_t max_value) {
    return as_integer(require(key), field(key), min_value, max_value);
}

std::int64_t ObjectReader::integer_or(std::string_view key, std::int64_t fallback,
                                      std::int64_t min_value, std::int64_t max_value) {
    const Json* v = get(key);
    return v ? as_integer(*v, field(key), min_value, max_value) : fallback;
}

static double as_number(const Json& v, const std::string& field, double min_value,
                        double max_value) {
    if (!v.is_number()) throw SpecError(field, "must be a number, got " + kind_of(v));
    const double d = v.get<double>();
    if (!std::isfinite(d)) throw SpecError(field, "must be finite");
    if (d < min_value || d > max_value) {
        std::ostringstream os;
        os << "must be in [" << min_value << ", " << max_value << "], got " << d;
        throw SpecError(field, os.str());
    }
    return d;
}

double ObjectReader::number(std::string_view key, double min_value, double max_value) {
    return as_number(require(key), field(key), min_value, max_value);
}

double ObjectReader::number_or(std::string_view key, double fallback, double min_value,
                               double max_value) {
    const Json* v = get(key);
    return v ? as_number(*v, field(key), min_value, max_value) : fallback;
}

bool ObjectReader::boolean(std::string_view key) {
    const Json& v = require(key);
    if (!v.is_boolean()) throw SpecError(field(key), "must be true or false, got " + kind_of(v));
    return v.get<bool>();
}

bool ObjectReader::boolean_or(std::string_view key, bool fallback) {
    return has(key) ? boolean(key) : fallback;
}

std::string ObjectReader::string(std::string_view key) {
    const Json& v = require(key);
    if (!v.is_string()) throw SpecError(field(key), "must be a string, got " + kind_of(v));
    return v.get<std::string>();
}

std::string ObjectReader::string_or(std::string_view key, std::string fallback) {
    return has(key) ? string(key) : fallback;
}

void ObjectReader::expect_format(std::string_view expected) {
    const std::string got = string("format");
    if (got != expected)
        throw SpecError(field("format"),
                        "expected \"" + std::string(expected) + "\", got \"" + got + "\"");
}

void ObjectReader::finish() const {
    const std::vector<std::string_view> known(asked_.begin(), asked_.end());
    for (auto it = object_.begin(); it != object_.end(); ++it) {
        if (read_.contains(it.key())) continue;
        std::string reason = "unknown field";
        // Suggest among every key this reader was asked about (read or not present).
        if (auto hint = closest_word(it.key(), known); !hint.empty())
            reason += " (did you mean '" + hint + "'?)";
        throw SpecError(field(it.key()), reason);
    }
}

std::string closest_word(std::string_view word, std::span<const std::string_view> choices) {
    std::string best;
    std::size_t best_distance = std::max<std::size_t>(2, word.size() / 3) + 1, best_edit = 0;
    for (auto choice : choices) {
        // A key given without its prefix or suffix ("experts" for "num_experts") is a typo too;
        // between two equally near, the fewer edits wins ("optim_gradz": optim_grads, not optim).
        const bool part = word.size() >= 4 && choice.size() >= 4 &&
                          (choice.ends_with(word) || choice.starts_with(word) ||
                           word.ends_with(choice) || word.starts_with(choice));
        const std::size_t edit = edit_distance(word, choice);
        const std::size_t d = part ? std::min<std::size_t>(1, edit) : edit;
        if (d < best_distance || (d == best_distance && !best.empty() && edit < best_edit)) {
            best_distance = d;
            best_edit = edit;
            best = std::string(choice);
        }
    }
    return best;
}

std::size_t enum_index(const std::string& word, std::span<const std::string_view> choices,
                       const std::string& field) {
    for (std::size_t i = 0; i < choices.size(); ++i)
        if (choices[i] == word) return i;
    std::string list;
    for (auto c : choices) list += (list.empty() ? "" : " | ") + std::string(c);
    std::string reason = "unknown value \"" + word + "\" (expected " + list + ")";
    if (auto hint = closest_word(word, choices); !hint.empty())
        reason += "; did you mean \"" + hint + "\"?";
    throw SpecError(field, reason);
}

} // namespace trident::core
