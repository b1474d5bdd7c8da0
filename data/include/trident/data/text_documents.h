#pragma once
// TextDocuments: streams the documents of a list of text files, one file and one line at a time,
// so memory stays bounded by the longest document, never by the corpus.
//
// Formats, chosen by extension:
//   .jsonl / .json  one JSON object per line with a string field "text" (the convention of
//                   Megatron's preprocess_data.py); other fields are ignored, blank lines skipped.
//   anything else   plain text; documents are paragraphs separated by one or more blank
//                   (empty or whitespace-only) lines. A document's bytes are kept exactly,
//                   except that the line terminator after its last line belongs to the separator.
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

namespace trident::data {

class TextDocuments {
public:
    // Checks every path up front: SpecError{path, "no such file"} (or "is a directory",
    // "cannot be read") before any document is returned.
    explicit TextDocuments(std::vector<std::string> paths);

    // Fills `document` with the next document and returns true, or returns false at the end.
    // A malformed JSONL line throws SpecError{"FILE:LINE", reason}.
    bool next(std::string& document);

    // Bytes consumed so far and the sum of the files' sizes: a progress bar's two numbers.
    std::uint64_t bytes_read() const { return bytes_read_; }
    std::uint64_t total_bytes() const { return total_bytes_; }
    std::uint64_t documents_read() const { return documents_read_; }

private:
    bool open_next_file();
    bool read_line(std::string& line);
    bool next_json_document(std::string& document);
    bool next_paragraph(std::string& document);

    std::vector<std::string> paths_;
    std::size_t next_path_ = 0; // index of the file to open after the current one
    std::ifstream file_;
    bool file_open_ = false;
    bool json_lines_ = false;
    std::uint64_t line_number_ = 0; // of the line last read in the current file, 1-based
    std::string line_;
    std::uint64_t bytes_read_ = 0;
    std::uint64_t total_bytes_ = 0;
    std::uint64_t documents_read_ = 0;
};

} // namespace trident::data
