#pragma once
// For fuzz targets whose reader takes files: one scratch folder per process, and the input cut
// into the parts a reader wants (a length prefix says where the first part ends).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <unistd.h>

namespace trident::fuzz {

inline const std::filesystem::path& scratch_dir() {
    static const std::filesystem::path dir = [] {
        std::string name =
            (std::filesystem::temp_directory_path() / "trident-fuzz-XXXXXX").string();
        if (!::mkdtemp(name.data())) std::abort();
        return std::filesystem::path(name);
    }();
    return dir;
}

inline void write_file(const std::filesystem::path& path, std::string_view bytes) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), std::streamsize(bytes.size()));
}

// The first two bytes (little-endian) give the first part's length, cut to what is there.
struct TwoParts {
    std::string_view first, second;
};
inline TwoParts two_parts(const std::uint8_t* data, std::size_t size) {
    if (size < 2) return {};
    const std::size_t wanted = std::size_t(data[0]) | std::size_t(data[1]) << 8;
    const std::string_view rest(reinterpret_cast<const char*>(data) + 2, size - 2);
    const std::size_t cut = wanted < rest.size() ? wanted : rest.size();
    return {rest.substr(0, cut), rest.substr(cut)};
}

} // namespace trident::fuzz
