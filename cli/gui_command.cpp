// `trident gui [FILE…]`: the Qt window lives in its own binary, trident-gui, built only where
// Qt6 is found, so that `trident` itself never links Qt (it runs on compute nodes without it).
// This command finds trident-gui beside itself and replaces itself with it, arguments as given.
#include "command.h"
#include "trident/core/spec_error.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <unistd.h>
#include <vector>

namespace trident::cli {
namespace {

namespace fs = std::filesystem;

// TRIDENT_GUI_PATH (an explicit choice), else beside `trident` (installed: both in bin/), else
// the build tree's gui/ next to cli/.
std::optional<fs::path> find_gui_binary() {
    if (const char* chosen = std::getenv("TRIDENT_GUI_PATH"); chosen && *chosen) {
        if (::access(chosen, X_OK) == 0) return fs::path(chosen);
        throw core::SpecError("TRIDENT_GUI_PATH",
                              std::string(chosen) + " is not an executable trident-gui");
    }
    std::error_code ec;
    const fs::path self = fs::read_symlink("/proc/self/exe", ec);
    if (ec) return std::nullopt;
    for (const fs::path& candidate :
         {self.parent_path() / "trident-gui", self.parent_path() / ".." / "gui" / "trident-gui"})
        if (::access(candidate.c_str(), X_OK) == 0) return candidate.lexically_normal();
    return std::nullopt;
}

} // namespace

Command add_gui_command(CLI::App& app) {
    Command c;
    c.app = app.add_subcommand(
        "gui", "Open the Qt window (trident-gui): timeline, compare, planner; FILE… and options "
               "such as --screenshot OUT.png go to trident-gui (trident gui --help lists them)");
    // Everything after `gui`, --help included, belongs to trident-gui.
    c.app->prefix_command();
    c.app->set_help_flag();
    CLI::App* gui = c.app;
    c.run = [gui]() -> int {
        const std::optional<fs::path> binary = find_gui_binary();
        if (!binary)
            throw core::SpecError(
                "gui", TRIDENT_WITH_GUI
                           ? "trident-gui is not beside trident (build the trident-gui target)"
                           : "this build has no GUI: install Qt6 (qt6-base-dev) and configure with "
                             "-DTRIDENT_GUI=ON");
        std::vector<std::string> args = gui->remaining();
        std::string program = binary->string();
        std::vector<char*> argv = {program.data()};
        for (std::string& a : args) argv.push_back(a.data());
        argv.push_back(nullptr);
        std::fflush(stdout);
        std::fflush(stderr);
        ::execv(program.c_str(), argv.data());
        throw core::SpecError("gui", "cannot start " + program + ": " + std::strerror(errno));
    };
    return c;
}

} // namespace trident::cli
