#include "trident/data/text_documents.h"

#include "trident/core/spec_error.h"

#include <filesystem>
#include <nlohmann/json.hpp>

namespace trident::data {
namespace {

bool is_json_lines_path(const std::string& path) {
    const std::string extension = std::filesystem::path(path).extension().string();
    return extension == ".jsonl" || extension == ".json";
}

bool is_blank(const std::string& line) {
    return line.find_first_not_of(" \t\r\f\v") == std::string::npos;
}

// nlohmann's message starts with its own tag and position ("[json.exception.parse_error.101]
// parse error at line 1, column 5: "); keep the column and the description.
std::string describe_parse_error(const nlohmann::json::parse_error& e) {
    std::string what = e.what();
    if (auto at = what.find("column "); at != std::string::npos) what = what.substr(at);
    return "not valid JSON: " + what;
}

} // namespace

TextDocuments::TextDocuments(std::vector<std::string> paths) : paths_(std::move(paths)) {
    for (const std::string& path : paths_) {
        std::error_code ec;
        const auto status = std::filesystem::status(path, ec);
        if (!std::filesystem::exists(status)) throw core::SpecError(path, "no such file");
        if (std::filesystem::is_directory(status))
            throw core::SpecError(path, "is a directory, not a text file");
        if (!std::ifstream(path, std::ios::binary))
            throw core::SpecError(path, "cannot be read (permission denied?)");
        total_bytes_ += std::filesystem::file_size(path, ec);
    }
}

bool TextDocuments::open_next_file() {
    if (next_path_ == paths_.size()) return false;
    const std::string& path = paths_[next_path_++];
    file_ = std::ifstream(path, std::ios::binary);
    if (!file_) throw core::SpecError(path, "cannot be read any more (removed while reading?)");
    file_open_ = true;
    json_lines_ = is_json_lines_path(path);
    line_number_ = 0;
    return true;
}

bool TextDocuments::read_line(std::string& line) {
    if (!std::getline(file_, line)) {
        if (file_.bad()) throw core::SpecError(paths_[next_path_ - 1], "read error");
        return false;
    }
    ++line_number_;
    bytes_read_ += line.size() + (file_.eof() ? 0 : 1); // the '\n' getline consumed
    return true;
}

bool TextDocuments::next_json_document(std::string& document) {
    while (read_line(line_)) {
        if (is_blank(line_)) continue;
        const std::string where = paths_[next_path_ - 1] + ":" + std::to_string(line_number_);
        nlohmann::json object;
        try {
            object = nlohmann::json::parse(line_);
        } catch (const nlohmann::json::parse_error& e) {
            throw core::SpecError(where, describe_parse_error(e));
        } catch (const nlohmann::json::out_of_range& e) {
            // A number too large for a double (1e400): nlohmann gives no position for it.
            std::string what = e.what();
            if (auto at = what.find("] "); at != std::string::npos) what = what.substr(at + 2);
            throw core::SpecError(where, "not valid JSON: number out of range: " + what);
        }
        if (!object.is_object())
            throw core::SpecError(where, std::string("must be a JSON object with a \"text\" "
                                                     "field, got ") +
                                             object.type_name());
        const auto text = object.find("text");
        if (text == object.end()) throw core::SpecError(where, "has no \"text\" field");
        if (!text->is_string())
            throw core::SpecError(where, std::string("\"text\" must be a string, got ") +
                                             text->type_name());
        document = text->get<std::string>();
        return true;
    }
    return false;
}

bool TextDocuments::next_paragraph(std::string& document) {
    document.clear();
    bool started = false;
    while (read_line(line_)) {
        if (is_blank(line_)) {
            if (started) break;
            continue;
        }
        if (started) document += '\n';
        document += line_;
        started = true;
    }
    // A CRLF file's last "\r" is part of the terminator, not of the text.
    if (started && document.back() == '\r') document.pop_back();
    return started;
}

bool TextDocuments::next(std::string& document) {
    for (;;) {
        if (!file_open_ && !open_next_file()) return false;
        if (json_lines_ ? next_json_document(document) : next_paragraph(document)) {
            ++documents_read_;
            return true;
        }
        file_.close();
        file_open_ = false;
    }
}

} // namespace trident::data
