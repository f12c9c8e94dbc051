// The SVG charts: well-formed documents that carry their data.
#include "tasks/common/svg.h"

#include <gtest/gtest.h>

#include <cmath>

#include "engine/error.h"

namespace ag::plot {
namespace {

int count(const std::string& text, const std::string& part) {
  int n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

TEST(Svg, LineChartHasOneLinePerSeries) {
  const std::string svg = line_chart("Loss <MSE>", "epoch", "loss", {{"train", {3, 2, 1.5, NAN}}, {"val", {4, 3}}});
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_EQ(count(svg, "<polyline"), 2);
  EXPECT_NE(svg.find("Loss &lt;MSE&gt;"), std::string::npos);
  EXPECT_EQ(svg.find("nan"), std::string::npos);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
}

TEST(Svg, LineChartWithNamedPositionsAndACaption) {
  const std::string plain = line_chart("t", "x", "y", {{"a", {1, NAN, 3}}});
  const std::string named =
      line_chart("t", "x", "y", {{"a", {1, NAN, 3}}, {"b", {2}}}, 1, {"one\n10", "two<\n5", "three\n7"},
                 "a caption long enough to need "
                 "two lines: it says how the points were made, and why some were pooled.");
  EXPECT_EQ(plain.rfind(header(640, 420), 0), 0u);
  EXPECT_EQ(count(plain, "<circle"), 0);
  const std::string first_tick = "y=\"388\" text-anchor=\"middle\">1</text>";  // under the plot, at x = 1
  EXPECT_NE(plain.find(first_tick), std::string::npos);
  // Two lines of names and two of caption below: 14 + 2 · 18 px taller.
  EXPECT_EQ(named.rfind(header(640, 470), 0), 0u);
  EXPECT_EQ(count(named, "<circle"), 3);  // every finite point, the lone ones too
  for (const char* name : {">one<", ">10<", ">two&lt;<", ">three<", ">7<"})
    EXPECT_NE(named.find(name), std::string::npos) << name;
  EXPECT_EQ(named.find(first_tick), std::string::npos);  // names, not numbers
  EXPECT_NE(named.find(">a caption long enough to need two lines: it says how the points were made, and why<"),
            std::string::npos);
  EXPECT_NE(named.find(">some were pooled.<"), std::string::npos);
  EXPECT_EQ(count(named, "<text"), count(named, "</text>"));
  EXPECT_THROW(line_chart("t", "x", "y", {{"a", {1, 2, 3}}}, 1, {"one", "two"}), ag::Error);
}

TEST(Svg, EscapeLeavesNothingXmlForbids) {
  // XML 1.0 allows no control characters but TAB, LF, CR, and only UTF-8 text: such bytes are shown.
  EXPECT_EQ(escape(std::string("a\x01<b>&\"\0\xff", 9)), "a\\x01&lt;b&gt;&amp;&quot;\\x00\\xff");
  EXPECT_EQ(escape("caf\xc3\xa9"), "caf\xc3\xa9");
}

TEST(Svg, HeatmapHasACellPerValue) {
  const std::string svg = heatmap("attention", {"a", "b"}, {"a", "b", "c"}, {0.1, 0.2, 0.7, 1, 0, 0});
  EXPECT_EQ(count(svg, "<rect x="), 6);
  EXPECT_NE(svg.find(">0.70<"), std::string::npos);
}

TEST(Svg, BarChartHasABarPerValue) {
  const std::string svg = bar_chart("counts", {"a", "b<c"}, {2, 4}, "{:.0f}");
  EXPECT_EQ(count(svg, "<rect x="), 2);
  EXPECT_NE(svg.find(">b&lt;c<"), std::string::npos);
  EXPECT_NE(svg.find(">4<"), std::string::npos);
  EXPECT_THROW(bar_chart("bad", {"a"}, {-1}), ag::Error);
  EXPECT_THROW(bar_chart("bad", {"a"}, {1, 2}), ag::Error);
}

TEST(Svg, StackPutsDocumentsOneBelowTheOther) {
  const std::string top = header(100, 50) + "</svg>\n", bottom = header(300, 70) + "</svg>\n";
  const std::string svg = stack({top, bottom});
  EXPECT_EQ(svg.rfind(header(300, 120), 0), 0u);
  EXPECT_NE(svg.find("<svg x=\"0\" y=\"0\" xmlns"), std::string::npos);
  EXPECT_NE(svg.find("<svg x=\"0\" y=\"50\" xmlns"), std::string::npos);
  EXPECT_EQ(count(svg, "</svg>"), 3);
  EXPECT_THROW(stack({"<g/>"}), ag::Error);
}

TEST(Svg, TicksAreRound) {
  const std::vector<double> unit = ticks(0, 1, 5);
  ASSERT_EQ(unit.size(), 6u);
  for (size_t i = 0; i < unit.size(); ++i) EXPECT_NEAR(unit[i], 0.2 * i, 1e-12);
  EXPECT_EQ(ticks(1, 100, 4), (std::vector<double>{50, 100}));
}

}  // namespace
}  // namespace ag::plot
