// The GUI tests' main: one QApplication for every test, on Qt's offscreen platform unless the
// caller chose another (QT_QPA_PLATFORM), so the suite runs without a display — also when CTest
// lists the tests at build time.
#include <QApplication>
#include <gtest/gtest.h>

int main(int argc, char** argv) {
    if (qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM")) qputenv("QT_QPA_PLATFORM", "offscreen");
    QApplication app(argc, argv);
    testing::InitGoogleTest(&argc, argv);
    return RUN_ALL_TESTS();
}
