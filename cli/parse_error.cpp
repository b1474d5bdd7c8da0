#include "parse_error.h"

#include "trident/core/json_io.h"

#include <cstdio>
#include <cstdlib>
#include <regex>
#include <sstream>
#include <string_view>
#include <vector>

namespace trident::cli {
namespace {

// The deepest subcommand of `app` that argv's leading words name ("checkpoint list" → list),
// or app itself, and the first word after them that names none ("" when there is none).
std::pair<const CLI::App*, std::string> named_command(const CLI::App& app, int argc, char** argv) {
    const CLI::App* at = &app;
    for (int i = 1; i < argc; ++i) {
        const std::string word = argv[i];
        if (word.empty() || word[0] == '-') break;
        const CLI::App* next = nullptr;
        for (const CLI::App* sub : at->get_subcommands([](const CLI::App*) { return true; }))
            if (sub->get_name() == word) next = sub;
        if (!next) return {at, word};
        at = next;
    }
    return {at, ""};
}

std::string command_path(const CLI::App* command) {
    std::string path;
    for (const CLI::App* a = command; a; a = a->get_parent())
        path = a->get_name() + (path.empty() ? "" : " " + path);
    return path;
}

std::vector<std::string> subcommand_names(const CLI::App* command) {
    std::vector<std::string> names;
    for (const CLI::App* sub : command->get_subcommands([](const CLI::App*) { return true; }))
        names.push_back(sub->get_name());
    return names;
}

std::string joined(const std::vector<std::string>& words) {
    std::string text;
    for (const auto& w : words) text += (text.empty() ? "" : ", ") + w;
    return text;
}

std::string closest(const std::string& word, const std::vector<std::string>& choices) {
    std::vector<std::string_view> views(choices.begin(), choices.end());
    const std::string hint = core::closest_word(word, views);
    return hint.empty() ? "" : "; did you mean '" + hint + "'?";
}

std::string type_words(const CLI::App* command, const std::string& option) {
    const CLI::Option* o = command->get_option_no_throw(option);
    const std::string type = o ? o->get_type_name() : "";
    if (type.find("UINT") != std::string::npos) return "a non-negative integer";
    if (type.find("INT") != std::string::npos) return "an integer";
    if (type.find("FLOAT") != std::string::npos) return "a number";
    return "a valid value";
}

// An unexpected word: a mistyped command, or an option this command does not have.
std::pair<std::string, std::string> unexpected(const CLI::App* command, const std::string& word) {
    if (!word.empty() && word[0] == '-') {
        std::vector<std::string> options;
        for (const CLI::Option* o : command->get_options())
            for (const std::string& name : o->get_lnames()) options.push_back("--" + name);
        return {word, "not an option of `" + command_path(command) + "`" + closest(word, options) +
                          " (trident " +
                          command_path(command).substr(command_path(command).find(' ') + 1) +
                          " --help)"};
    }
    const auto names = subcommand_names(command);
    if (!names.empty())
        return {word, "not a command of `" + command_path(command) + "`" + closest(word, names) +
                          " (commands: " + joined(names) + ")"};
    return {word, "unexpected argument to `" + command_path(command) + "`"};
}

// CLI11's "Value 0 not in range 0.000000 to 1.79769e+308" as people say it: "must be greater
// than 0, not 0" (PositiveNumber), "must be at least 0, not -1", "must be between 1 and 256".
std::string range_reason(const std::string& value, const std::string& low,
                         const std::string& high) {
    const auto shortest = [](const std::string& number) {
        char text[32];
        std::snprintf(text, sizeof text, "%g", std::strtod(number.c_str(), nullptr));
        return std::string(text);
    };
    const double v = std::strtod(value.c_str(), nullptr), lo = std::strtod(low.c_str(), nullptr);
    if (std::strtod(high.c_str(), nullptr) < 1e15)
        return "must be between " + shortest(low) + " and " + shortest(high) + ", not " + value;
    return (v == lo ? "must be greater than " : "must be at least ") + shortest(low) + ", not " +
           value;
}

} // namespace

std::pair<std::string, std::string>
describe_parse_error(const CLI::ParseError& error, const CLI::App& app, int argc, char** argv) {
    const auto [command, unknown_word] = named_command(app, argc, argv);
    const std::string what = error.what();
    std::smatch m;
    if (std::regex_match(what, m, std::regex(R"(Could not convert: (\S+) = (.*))")))
        return {m[1], "'" + m[2].str() + "' is not " + type_words(command, m[1])};
    if (std::regex_match(what, m, std::regex(R"((\S+): At Most 1 required but received (\d+))")))
        return {m[1], "given " + m[2].str() + " times; give it once"};
    if (std::regex_match(what, m, std::regex(R"((\S+): Value (\S+) not in range (\S+) to (\S+))")))
        return {m[1], range_reason(m[2], m[3], m[4])};
    if (std::regex_match(what, m,
                         std::regex(R"((\S+): At least (\d+) required but received (\d+))")))
        return {m[1], "needs " + m[2].str() + " values, got " + m[3].str()};
    if (std::regex_match(what, m, std::regex(R"((\S+): \d+ required \S+ missing)")))
        return {m[1], "needs a value"};
    if (std::regex_match(what, m, std::regex(R"((\S+) is required)")))
        return {m[1], "missing; `" + command_path(command) + "` needs it"};
    if (std::regex_match(
            what, m, std::regex(R"(The following arguments? (?:was|were) not expected: (.*))"))) {
        // CLI11 lists the extras in no useful order ("2 --tpp"): an option first, if any.
        std::istringstream words(m[1].str());
        std::string first, option;
        for (std::string w; words >> w;) {
            if (first.empty()) first = w;
            if (option.empty() && w[0] == '-') option = w;
        }
        return unexpected(command, option.empty() ? first : option);
    }
    if (what == "A subcommand is required") {
        // `trident bogus` lands here too: CLI11 takes the unknown word for an extra argument.
        if (!unknown_word.empty()) return unexpected(command, unknown_word);
        return {command == &app ? "command" : command_path(command),
                "missing: give one of " + joined(subcommand_names(command))};
    }
    // Anything else: CLI11's own words, split at its "FIELD: " when it has one.
    if (const auto colon = what.find(": "); colon != std::string::npos && what[0] == '-')
        return {what.substr(0, colon), what.substr(colon + 2)};
    return {command_path(command), what};
}

} // namespace trident::cli
