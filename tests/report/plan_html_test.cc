// The picture of memory renders in a real browser (headless Chromium) without errors and with
// one rectangle per placed alias class.
#include "report/plan_html.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "gmock/gmock.h"
#include "graph/model_loader.h"
#include "graph/shape_inference.h"
#include "gtest/gtest.h"
#include "memonger/planner.h"
#include "report/plan_ascii.h"
#include "tests/random_graphs.h"
#include "tests/test_support.h"

namespace memonger {
namespace {

using ::testing::HasSubstr;

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

graph::Graph Example(const std::string& l) {
  graph::LoadOptions options;
  EXPECT_TRUE(graph::ParseDimBinding("L=" + l, options.bindings).ok());
  auto g = graph::LoadModel(memonger::testing::SourcePath("examples/transformer_block_fp16.pbtxt"),
                            options);
  EXPECT_TRUE(g.ok()) << g.status();
  EXPECT_TRUE(graph::InferShapes(*g, options.bindings).ok());
  return *std::move(g);
}

Plan MakePlan(const graph::Graph& g) {
  PlanOptions options;
  options.planner = PlannerKind::kExactSharing;
  options.time_limit_seconds = 1;
  auto plan = PlanMemory(g, options);
  EXPECT_TRUE(plan.ok()) << plan.status();
  return *std::move(plan);
}

const char* Chromium() {
  for (const char* path : {"/usr/bin/chromium", "/usr/bin/chromium-browser"}) {
    if (std::filesystem::exists(path)) return path;
  }
  return nullptr;
}

struct Rendered {
  std::string dom;
  std::string log;
};

// Loads the page in headless Chromium and returns the DOM after its scripts ran.
Rendered Render(const std::string& html_path) {
  const std::string dir = memonger::testing::TempDir();
  const std::string command =
      std::string("timeout 120 ") + Chromium() +
      " --headless --no-sandbox --disable-gpu --disable-quic --no-first-run"
      " --disable-background-networking --disable-component-update --disable-sync"
      " --enable-logging=stderr --v=0 --user-data-dir=" + dir + "/profile"
      " --dump-dom file://" + html_path + " >" + dir + "/dom.html 2>" + dir + "/chromium.log";
  const int status = std::system(command.c_str());
  EXPECT_EQ(status, 0) << Slurp(dir + "/chromium.log");
  return {Slurp(dir + "/dom.html"), Slurp(dir + "/chromium.log")};
}

void ExpectRendersCleanly(const graph::Graph& g, const Plan& plan) {
  const std::string path = memonger::testing::WriteTempFile("plan.html", PlanToHtml(g, plan));
  const Rendered r = Render(path);
  const int expected = PlanRectangleCount(g, plan);
  EXPECT_THAT(r.dom, HasSubstr("data-status=\"ok\""));
  EXPECT_THAT(r.dom, HasSubstr("data-rects=\"" + std::to_string(expected) + "\""));
  const std::regex rect("<rect class=\"value\"");
  const auto count = std::distance(std::sregex_iterator(r.dom.begin(), r.dom.end(), rect),
                                   std::sregex_iterator());
  EXPECT_EQ(count, expected);
  // Console errors and uncaught exceptions reach the log as CONSOLE lines.
  EXPECT_THAT(r.log, ::testing::Not(HasSubstr("Uncaught")));
  EXPECT_THAT(r.log, ::testing::Not(HasSubstr(":CONSOLE")));
}

TEST(PlanHtmlTest, ExampleRendersInHeadlessChromium) {
  if (Chromium() == nullptr) GTEST_SKIP() << "chromium is not installed (tools/setup.sh --browser)";
  const graph::Graph g = Example("1025");
  const Plan plan = MakePlan(g);
  ASSERT_GT(PlanRectangleCount(g, plan), 15);  // a picture with something in it
  ExpectRendersCleanly(g, plan);
}

TEST(PlanHtmlTest, RandomGraphRendersInHeadlessChromium) {
  if (Chromium() == nullptr) GTEST_SKIP() << "chromium is not installed (tools/setup.sh --browser)";
  memonger::testing::RandomGraphOptions options;
  const graph::Graph g = memonger::testing::RandomGraph(7, options);
  ExpectRendersCleanly(g, MakePlan(g));
}

TEST(PlanHtmlTest, SeriesWithBudgetAndMeasuredCurveRendersInHeadlessChromium) {
  if (Chromium() == nullptr) GTEST_SKIP() << "chromium is not installed (tools/setup.sh --browser)";
  const graph::Graph small = Example("129");
  const graph::Graph large = Example("513");
  const Plan small_plan = MakePlan(small);
  const Plan large_plan = MakePlan(large);
  HtmlOptions options;
  options.budget_bytes = large_plan.arena_bytes / 2;
  // Another runtime's bytes over the pass, with points outside [0, 1] (clamped, not drawn off).
  options.measured.push_back(
      {"eager", {{0.0, 100}, {0.5, large_plan.arena_bytes}, {2.0, 50}, {-1.0, 10}}});
  const std::string html = PlansToHtml(
      {{"L=129", &small, &small_plan}, {"L=513", &large, &large_plan}}, "two lengths", options);
  EXPECT_THAT(html, HasSubstr("\"budget_text\""));
  const std::string path = memonger::testing::WriteTempFile("series.html", html);
  const Rendered r = Render(path);
  EXPECT_THAT(r.dom, HasSubstr("data-status=\"ok\""));
  EXPECT_THAT(r.dom, HasSubstr("data-frames=\"2\""));
  // The first frame is shown: its rectangles, its steps, every step listed.
  EXPECT_THAT(r.dom, HasSubstr("data-rects=\"" +
                               std::to_string(PlanRectangleCount(small, small_plan)) + "\""));
  EXPECT_THAT(r.dom, HasSubstr("data-steps=\"" + std::to_string(small_plan.steps.size()) + "\""));
  EXPECT_THAT(r.dom, HasSubstr("data-listed=\"" + std::to_string(small_plan.steps.size()) + "\""));
  EXPECT_THAT(r.dom, HasSubstr("class=\"live\""));  // the live-bytes curve
  EXPECT_THAT(r.dom, HasSubstr("budget "));
  EXPECT_THAT(r.log, ::testing::Not(HasSubstr("Uncaught")));
  EXPECT_THAT(r.log, ::testing::Not(HasSubstr(":CONSOLE")));
  // ?frame=1 shows the second.
  const Rendered second = Render(path + "?frame=1");
  EXPECT_THAT(second.dom, HasSubstr("data-rects=\"" +
                                    std::to_string(PlanRectangleCount(large, large_plan)) + "\""));
  EXPECT_THAT(second.dom, HasSubstr("at L=513"));
}

TEST(PlanHtmlTest, NamesAreEscapedAndDataCannotCloseTheScript) {
  auto g = memonger::testing::GraphFromText(R"pb(
    name: "</script><b>x</b>"
    external_input: "in</script>"
    op { type: "Relu" input: "in</script>" output: "<!--y" }
    value_info {
      name: "in</script>"
      dtype: FLOAT
      has_shape: true
      dim { size: 4 }
    }
  )pb");
  ASSERT_TRUE(g.ok()) << g.status();
  ASSERT_TRUE(graph::InferShapes(*g, {}).ok());
  Plan plan = MakePlan(*g);
  plan.model = "<model>";
  const std::string html = PlanToHtml(*g, plan);
  EXPECT_THAT(html, ::testing::Not(HasSubstr("in</script>")));
  EXPECT_THAT(html, HasSubstr("&lt;model&gt;"));
  if (Chromium() != nullptr) ExpectRendersCleanly(*g, plan);
}

TEST(PlanAsciiTest, ShowsEveryClassAndTheLegend) {
  const graph::Graph g = Example("129");
  const Plan plan = MakePlan(g);
  const std::string picture = PlanToAscii(g, plan);
  EXPECT_THAT(picture, HasSubstr("+"));
  EXPECT_THAT(picture, HasSubstr("A x ("));
  EXPECT_THAT(picture, HasSubstr("scores"));
  EXPECT_THAT(picture, HasSubstr("27 steps"));
}

}  // namespace
}  // namespace memonger
