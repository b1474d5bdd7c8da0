// trident-gui: the Trident window (timeline, compare, planner) — or, with --screenshot, the same
// window rendered to a PNG without a display, for tests and documentation.
// Exit codes: 0 success, 2 bad arguments, no display, or a file that cannot be opened (one
// line on stderr).
#include "main_window.h"

#include <QApplication>
#include <QCommandLineParser>
#include <QLayout>
#include <QRegularExpression>
#include <iostream>

namespace {

int usage_error(const QString& text) {
    std::cerr << "trident-gui: error: " << text.toStdString() << " (see trident-gui --help)\n";
    return 2;
}

int file_error(const QString& text) {
    std::cerr << "trident-gui: error: " << text.toStdString() << "\n";
    return 2;
}

// Qt's offscreen platform reports what it cannot do (size hints, a runtime dir) on stderr;
// for a screenshot that is noise around the one line that matters, so only those are dropped.
void quiet_offscreen_notes(QtMsgType type, const QMessageLogContext& context,
                           const QString& message) {
    if (type == QtWarningMsg && (message.startsWith("This plugin does not support") ||
                                 message.startsWith("QStandardPaths: XDG_RUNTIME_DIR")))
        return;
    std::cerr << qFormatLogMessage(type, context, message).toStdString() << "\n";
}

bool has_display() {
    return !qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM") ||
           !qEnvironmentVariableIsEmpty("DISPLAY") ||
           !qEnvironmentVariableIsEmpty("WAYLAND_DISPLAY");
}

} // namespace

int main(int argc, char** argv) {
    using trident::gui::MainWindow;
    QStringList arguments;
    for (int i = 0; i < argc; ++i) arguments << QString::fromLocal8Bit(argv[i]);

    // Arguments are read before QApplication exists: --help and mistakes need no display, and
    // the platform must be chosen before the application starts.
    QCommandLineParser parser;
    parser.setApplicationDescription(
        "Trident's window: timelines of simulated and measured steps, two of them compared, and "
        "the planner.");
    const QCommandLineOption help({"h", "help"}, "Show this help");
    const QCommandLineOption screenshot(
        "screenshot", "Render the window to a PNG without a display and exit", "out.png");
    const QCommandLineOption view("view", "View to show: timeline, compare or planner", "view",
                                  "timeline");
    const QCommandLineOption size("size", "Window size (default 1400x900)", "WxH", "1400x900");
    const QCommandLineOption profile(
        "profile",
        "Device profile (preset or trident.profile/1 file) for plans, reports and the Planner; "
        "default: the plan's, then ./DEVICE.json, the user's profile folder, the preset",
        "profile");
    parser.addOptions({help, screenshot, view, size, profile});
    parser.addPositionalArgument(
        "FILE", "Trace, plan or report to open; a second file is compared with the first",
        "[FILE…]");
    if (!parser.parse(arguments)) return usage_error(parser.errorText());
    if (parser.isSet(help)) {
        std::cout << "Usage: trident-gui [--screenshot out.png] [--view timeline|compare|planner] "
                     "[--size WxH] [--profile P] [FILE…]\n"
                  << parser.helpText().section('\n', 1).toStdString();
        return 0;
    }
    const QStringList views = {"timeline", "compare", "planner"};
    const auto view_index = views.indexOf(parser.value(view));
    if (view_index < 0)
        return usage_error("--view: expected timeline, compare or planner, got \"" +
                           parser.value(view) + "\"");
    const auto size_match =
        QRegularExpression(R"(^(\d{2,5})x(\d{2,5})$)").match(parser.value(size));
    if (!size_match.hasMatch())
        return usage_error("--size: expected WIDTHxHEIGHT like 1400x900, got \"" +
                           parser.value(size) + "\"");
    const QStringList files = parser.positionalArguments();
    if (files.size() > 2) return usage_error("at most two files (the second is compared)");
    if (view_index == 1 && files.size() != 2) return usage_error("--view compare needs two files");

    if (parser.isSet(screenshot)) {
        if (qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM")) qputenv("QT_QPA_PLATFORM", "offscreen");
        qInstallMessageHandler(quiet_offscreen_notes);
    } else if (!has_display()) {
        return file_error("no display (set DISPLAY, or use --screenshot out.png, or "
                          "QT_QPA_PLATFORM=offscreen)");
    }
    QApplication app(argc, argv);
    QApplication::setApplicationName("trident-gui");

    MainWindow window;
    // A screenshot is exactly --size, even below the window's minimum (the planner's controls
    // then clip), so pictures for documentation and tests have the size asked for.
    if (parser.isSet(screenshot)) window.layout()->setSizeConstraint(QLayout::SetNoConstraint);
    window.resize(size_match.captured(1).toInt(), size_match.captured(2).toInt());
    if (parser.isSet(profile)) window.set_profile(parser.value(profile));
    if (!files.isEmpty() && !window.open_file(files[0])) return file_error(window.last_error());
    if (files.size() == 2 && !window.open_compare_file(files[1]))
        return file_error(window.last_error());
    window.show_view(MainWindow::View(view_index));
    window.show();

    if (!parser.isSet(screenshot)) return QApplication::exec();
    QApplication::processEvents(); // lay out and paint once before grabbing
    const QString out = parser.value(screenshot);
    if (!window.grab().save(out, "PNG")) return file_error(out + ": cannot write the PNG file");
    return 0;
}
