// libFuzzer target for the other JSON readers of untrusted files: device profiles (`--profile`)
// and Chrome traces (`trident gui`, compare). Any bytes must load or raise SpecError.
#include "trident/core/profile.h"
#include "trident/core/spec_error.h"
#include "trident/core/trace.h"

#include <cstddef>
#include <cstdint>
#include <string_view>

using namespace trident::core;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    Json j;
    try {
        j = parse_json_text(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz");
    } catch (const SpecError&) {
        return 0;
    }
    try {
        (void)Profile::from_json(j);
    } catch (const SpecError&) {
    }
    try {
        (void)read_chrome_trace(j);
    } catch (const SpecError&) {
    }
    return 0;
}
