// `trident version`: the version and which optional parts this binary was built with.
#include "command.h"

#include <iostream>

namespace trident::cli {

Command add_version_command(CLI::App& app) {
    Command c;
    c.app = app.add_subcommand("version", "Print the version and the optional parts built in");
    c.run = [] {
        std::cout << "trident " << TRIDENT_VERSION << "\n"
                  << "cuda backend: " << (TRIDENT_WITH_CUDA ? "built" : "not built") << "\n"
                  << "gui: " << (TRIDENT_WITH_GUI ? "built" : "not built") << "\n";
        return 0;
    };
    return c;
}

} // namespace trident::cli
