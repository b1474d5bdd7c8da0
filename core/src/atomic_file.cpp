#include "trident/core/atomic_file.h"

#include "trident/core/spec_error.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <unistd.h>

namespace trident::core {

void write_file_atomically(const std::string& path, std::string_view text,
                           const std::string& field) {
    const std::string temporary = path + ".tmp." + std::to_string(::getpid());
    {
        std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
        if (!out) throw SpecError(field, "cannot write '" + path + "'");
        out.write(text.data(), static_cast<std::streamsize>(text.size()));
        out.flush();
        if (!out) {
            std::remove(temporary.c_str());
            throw SpecError(field, "writing '" + path + "' failed");
        }
    }
    std::error_code ec;
    std::filesystem::rename(temporary, path, ec);
    if (ec) {
        std::remove(temporary.c_str());
        throw SpecError(field, "cannot replace '" + path + "': " + ec.message());
    }
}

} // namespace trident::core
