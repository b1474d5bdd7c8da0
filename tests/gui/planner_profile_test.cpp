// The device profile in the GUI: the Planner tab's Profile field and trident-gui --profile
// plan a localhost job on the profile `trident profile` measured, which the plan then records;
// an empty field finds it as the command line does, and a missing one is a one-line error.
#include "main_window.h"
#include "planner_panel.h"
#include "planner_request.h"
#include "planner_table_model.h"

#include <QComboBox>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <sstream>

namespace trident::gui {
namespace {

const std::string kProfile = TRIDENT_FIXTURES "/profiles/cpu-host-2-ranks.json";
// As a plan records it: absolute, normalised.
const std::string kRecorded = std::filesystem::path(kProfile).lexically_normal().string();

PlannerRequest localhost_request() {
    PlannerRequest r;
    r.model = "gpt-tiny";
    r.cluster = "localhost";
    r.nodes = 1;
    r.devices_per_node = 2;
    r.global_batch_size = 8;
    r.seq_length = 32;
    return r;
}

TEST(PlannerProfile, TheFieldChoosesTheProfileAndThePlanRecordsIt) {
    PlannerRequest r = localhost_request();
    r.profile = kProfile;
    const PlannerJob job = load_planner_job(r);
    EXPECT_EQ(job.profile.name(), "cpu-host");
    EXPECT_EQ(job.specs.profile, kRecorded);
    // Empty: the search order, which has no cpu-host here (no ./cpu-host.json, no user copy).
    ::setenv("TRIDENT_PROFILE_DIR", "/nonexistent/trident-test-profiles", 1);
    r.profile.clear();
    try {
        load_planner_job(r);
        ADD_FAILURE() << "no profile for cpu-host should be found";
    } catch (const core::SpecError& e) {
        EXPECT_EQ(e.field(), "cluster.device");
        EXPECT_NE(e.reason().find("trident profile --backend cpu"), std::string::npos);
    }
}

TEST(PlannerProfile, MainWindowProfileReachesThePlannerTab) {
    MainWindow window;
    window.set_profile(QString::fromStdString(kProfile));
    PlannerPanel* panel = window.planner();
    EXPECT_EQ(panel->profile(), kProfile);
    PlannerRequest with = localhost_request();
    with.profile = kProfile;
    panel->set_request(with);
    EXPECT_EQ(panel->request().profile, kProfile);
    QSignalSpy finished(panel, &PlannerPanel::plan_finished);
    panel->run();
    ASSERT_TRUE(finished.wait(20000));
    ASSERT_TRUE(finished.front().front().toBool()) << panel->message().toStdString();
    EXPECT_GT(panel->results().rowCount(), 0);
    QTemporaryDir dir;
    const QString plan = dir.filePath("plan.json");
    ASSERT_TRUE(panel->save_plan(plan)) << panel->message().toStdString();
    std::ifstream in(plan.toStdString());
    std::stringstream text;
    text << in.rdbuf();
    EXPECT_NE(text.str().find("\"profile\": \"" + kRecorded + "\""), std::string::npos)
        << text.str();
}

} // namespace
} // namespace trident::gui
