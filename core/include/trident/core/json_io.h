#pragma once
// Strict JSON reading for the spec types: every getter names the full field path in its error,
// numbers are range-checked, enum words are matched exactly, and `finish()` rejects any key that
// was not read (with a "did you mean" hint). Unknown fields are errors, never ignored.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>

namespace trident::core {

using Json = nlohmann::ordered_json;

// Parses JSON text; a syntax error becomes SpecError{source, "line L, column C: ..."}.
Json parse_json_text(std::string_view text, const std::string& source);

// Reads a whole file and parses it; an unreadable file is a SpecError naming `field`.
Json read_json_file(const std::string& path, const std::string& field);

class ObjectReader {
public:
    // `path` is the dotted name of the object itself ("model", "parallel.recompute").
    ObjectReader(const Json& object, std::string path);
    // It keeps a reference: a temporary would dangle.
    ObjectReader(Json&& object, std::string path) = delete;

    const std::string& path() const { return path_; }
    std::string field(std::string_view key) const;
    bool has(std::string_view key);

    // Marks `key` as read and returns it, or nullptr when absent.
    const Json* get(std::string_view key);
    const Json& require(std::string_view key);

    std::int64_t integer(std::string_view key, std::int64_t min_value = 1,
                         std::int64_t max_value = INT64_MAX);
    std::int64_t integer_or(std::string_view key, std::int64_t fallback, std::int64_t min_value = 1,
                            std::int64_t max_value = INT64_MAX);
    double number(std::string_view key, double min_value, double max_value);
    double number_or(std::string_view key, double fallback, double min_value, double max_value);
    bool boolean(std::string_view key);
    bool boolean_or(std::string_view key, bool fallback);
    std::string string(std::string_view key);
    std::string string_or(std::string_view key, std::string fallback);

    // An exact `format` tag such as "trident.model/1": required at the top of every file.
    void expect_format(std::string_view expected);

    // Throws for the first key that no getter asked for.
    void finish() const;

private:
    const Json& object_;
    std::string path_;
    std::set<std::string, std::less<>> read_;  // keys present and read
    std::set<std::string, std::less<>> asked_; // every key asked for (typo suggestions)
};

// Checks a value read elsewhere (e.g. from a sub-object) with the same wording as the getters.
std::int64_t as_integer(const Json& value, const std::string& field, std::int64_t min_value,
                        std::int64_t max_value);

// Returns the closest word of `choices` to `word` when it is a plausible typo, else "".
std::string closest_word(std::string_view word, std::span<const std::string_view> choices);

// Looks up `word` in `choices` (exact match) and returns its index; throws naming the choices.
std::size_t enum_index(const std::string& word, std::span<const std::string_view> choices,
                       const std::string& field);

} // namespace trident::core
