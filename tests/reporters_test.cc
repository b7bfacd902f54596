// The training reporters: JSON-lines metrics, the SVG loss/accuracy plot, the progress bar.
#include "dpt/report/reporters.h"
#include "dpt/report/console_reporter.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "test_support.h"

using namespace dpt::report;  // the reporters (dpt::train::EpochStats comes as report::EpochStats)
using testing::HasSubstr;

namespace {

namespace fs = std::filesystem;

// A fresh directory under the system temp dir, removed at the end of the test.
class TempDir {
 public:
  TempDir() {
    const auto* info = testing::UnitTest::GetInstance()->current_test_info();
    path_ =
        fs::temp_directory_path() / ("dpt_reporters_" + std::string(info->name()) + "_" + std::to_string(::getpid()));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

std::string read_all(const fs::path& file) {
  std::ifstream in(file);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

EpochStats stats(int epoch, double loss, double train_acc, double test_acc) {
  EpochStats s;
  s.epoch = epoch;
  s.train_loss = loss;
  s.train_acc = train_acc;
  s.test_acc = test_acc;
  s.seconds = 1.5 * epoch;
  s.examples_per_sec = 40000.0 / epoch;
  s.eval_seconds = 0.25 * epoch;
  s.bytes_within_process = 1000 * epoch;
  s.bytes_between_processes = 7 * epoch;
  return s;
}

// A lesson-like run: loss falling from 2.3, accuracies rising to ~0.85.
std::vector<EpochStats> history(int epochs) {
  std::vector<EpochStats> h;
  for (int e = 1; e <= epochs; ++e) {
    const double t = epochs == 1 ? 0.0 : static_cast<double>(e - 1) / (epochs - 1);
    h.push_back(stats(e, 2.3 - 1.9 * t, 0.1 + 0.75 * t, 0.12 + 0.71 * t));
  }
  return h;
}

int count_of(const std::string& text, const std::string& needle) {
  int n = 0;
  for (size_t pos = text.find(needle); pos != std::string::npos; pos = text.find(needle, pos + needle.size())) ++n;
  return n;
}

// The (x, y) points of each <polyline>, in document order.
std::vector<std::vector<std::pair<double, double>>> polylines(const std::string& svg) {
  std::vector<std::vector<std::pair<double, double>>> lines;
  const std::regex polyline_re("<polyline[^>]*\\bpoints=\"([^\"]*)\"");
  const std::regex point_re("(-?[0-9.]+),(-?[0-9.]+)");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), polyline_re); it != std::sregex_iterator(); ++it) {
    const std::string points = (*it)[1];
    std::vector<std::pair<double, double>> line;
    for (auto p = std::sregex_iterator(points.begin(), points.end(), point_re); p != std::sregex_iterator(); ++p) {
      line.emplace_back(std::stod((*p)[1]), std::stod((*p)[2]));
    }
    lines.push_back(std::move(line));
  }
  return lines;
}

std::string trimmed(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  return s;
}

// Captures what a FILE* receives, through open_memstream.
class MemStream {
 public:
  MemStream() : file_(open_memstream(&buffer_, &size_)) {}
  ~MemStream() {
    if (file_) std::fclose(file_);
    std::free(buffer_);
  }
  std::FILE* file() { return file_; }
  std::string text() {
    std::fflush(file_);
    return std::string(buffer_, size_);
  }

 private:
  char* buffer_ = nullptr;
  size_t size_ = 0;
  std::FILE* file_;
};

}  // namespace

// ----------------------------------------------------------------------------------------------
// MetricsWriter

TEST(MetricsWriter, EachLineIsJsonWithExactlyTheFieldsWritten) {
  TempDir dir;
  const fs::path file = dir.path() / "metrics.jsonl";
  const std::vector<std::string> devices{"cpu:0", "cpu:1"};
  const std::vector<EpochStats> written{stats(1, 2.3025850929940455, 0.1, 0.125), stats(2, 0.5, 0.8125, 0.83)};
  {
    MetricsWriter writer(file);
    for (const EpochStats& s : written) writer.write(s, devices);
  }
  std::ifstream in(file);
  std::string line;
  size_t i = 0;
  while (std::getline(in, line)) {
    ASSERT_LT(i, written.size());
    const nlohmann::json j = nlohmann::json::parse(line);
    EXPECT_EQ(j.size(), 10u) << line;
    EXPECT_EQ(j.at("epoch").get<int>(), written[i].epoch);
    EXPECT_EQ(j.at("train_loss").get<double>(), written[i].train_loss);  // round-trips exactly
    EXPECT_EQ(j.at("train_acc").get<double>(), written[i].train_acc);
    EXPECT_EQ(j.at("test_acc").get<double>(), written[i].test_acc);
    EXPECT_EQ(j.at("seconds").get<double>(), written[i].seconds);
    EXPECT_EQ(j.at("examples_per_sec").get<double>(), written[i].examples_per_sec);
    EXPECT_EQ(j.at("eval_seconds").get<double>(), written[i].eval_seconds);
    EXPECT_EQ(j.at("bytes_within_process").get<int64_t>(), written[i].bytes_within_process);
    EXPECT_EQ(j.at("bytes_between_processes").get<int64_t>(), written[i].bytes_between_processes);
    EXPECT_EQ(j.at("devices").get<std::vector<std::string>>(), devices);
    ++i;
  }
  EXPECT_EQ(i, written.size());
}

TEST(MetricsWriter, FieldsComeInTheDocumentedOrder) {
  TempDir dir;
  const fs::path file = dir.path() / "metrics.jsonl";
  MetricsWriter(file).write(stats(1, 1, 0.5, 0.25), {"cpu:0"});
  EXPECT_EQ(read_all(file),
            "{\"epoch\":1,\"train_loss\":1.0,\"train_acc\":0.5,\"test_acc\":0.25,\"seconds\":1.5,"
            "\"examples_per_sec\":40000.0,\"eval_seconds\":0.25,\"bytes_within_process\":1000,"
            "\"bytes_between_processes\":7,\"devices\":[\"cpu:0\"]}\n");
}

TEST(MetricsWriter, EveryEpochIsOnDiskBeforeTheWriterCloses) {
  TempDir dir;
  const fs::path file = dir.path() / "metrics.jsonl";
  MetricsWriter writer(file);
  EXPECT_EQ(read_all(file), "");
  writer.write(stats(1, 2, 0.3, 0.4), {"cpu:0"});
  EXPECT_EQ(count_of(read_all(file), "\n"), 1);
  writer.write(stats(2, 1, 0.6, 0.7), {"cpu:0"});
  EXPECT_EQ(count_of(read_all(file), "\n"), 2);
}

TEST(MetricsWriter, TruncatesAnOldFile) {
  TempDir dir;
  const fs::path file = dir.path() / "metrics.jsonl";
  std::ofstream(file) << "old line\nold line\n";
  MetricsWriter writer(file);
  EXPECT_EQ(read_all(file), "");
}

TEST(MetricsWriter, UnwritablePathThrowsNamingThePathAndTheReason) {
  TempDir dir;
  const fs::path file = dir.path() / "no_such_dir" / "metrics.jsonl";
  const std::string message = dpt::testing_support::error_of<std::runtime_error>([&] { MetricsWriter writer(file); });
  EXPECT_THAT(message, HasSubstr(file.string()));
  EXPECT_THAT(message, HasSubstr("No such file or directory"));
}

// ----------------------------------------------------------------------------------------------
// SVG plot

TEST(SvgPlot, IsOneSelfContainedSvgDocument) {
  const std::string svg = svg_plot(history(10), "LeNet, 2 devices");
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_THAT(trimmed(svg), testing::EndsWith("</svg>"));
  EXPECT_EQ(count_of(svg, "<svg"), 1);
  EXPECT_EQ(count_of(svg, "</svg>"), 1);
  EXPECT_EQ(count_of(svg, "<script"), 0);
  EXPECT_EQ(count_of(svg, "href"), 0);  // no external resources
  EXPECT_THAT(svg, HasSubstr(">LeNet, 2 devices</text>"));
  EXPECT_THAT(svg, HasSubstr(">epoch</text>"));
  // Every opened element is closed (self-closing or with its end tag).
  EXPECT_EQ(count_of(svg, "<text"), count_of(svg, "</text>"));
  EXPECT_EQ(count_of(svg, "<g"), count_of(svg, "</g>"));
}

TEST(SvgPlot, DrawsThreeCurvesWithOnePointPerEpochAndALegend) {
  const std::string svg = svg_plot(history(10), "run");
  EXPECT_EQ(count_of(svg, "<polyline"), 3);
  const auto lines = polylines(svg);
  ASSERT_EQ(lines.size(), 3u);
  for (const auto& line : lines) {
    ASSERT_EQ(line.size(), 10u);
    for (size_t i = 1; i < line.size(); ++i) EXPECT_GT(line[i].first, line[i - 1].first);  // x follows the epoch
  }
  EXPECT_THAT(svg, HasSubstr(">train loss</text>"));
  EXPECT_THAT(svg, HasSubstr(">train acc</text>"));
  EXPECT_THAT(svg, HasSubstr(">test acc</text>"));
  // Loss solid, train acc dashed, test acc dotted: three distinct styles.
  EXPECT_THAT(svg, testing::ContainsRegex("<polyline[^>]*#1f77b4[^>]*points"));
  EXPECT_EQ(count_of(svg, "stroke-dasharray"), 2 * 2);  // two dashed curves, each also in the legend
}

TEST(SvgPlot, HigherValuesAreHigherUp) {
  const std::string svg = svg_plot(history(10), "run");
  const auto lines = polylines(svg);
  ASSERT_EQ(lines.size(), 3u);
  const auto& loss = lines[0];
  const auto& train_acc = lines[1];
  // Accuracy rises every epoch: its y shrinks (SVG y grows downward). Loss falls: y grows.
  for (size_t i = 1; i < train_acc.size(); ++i) {
    EXPECT_LT(train_acc[i].second, train_acc[i - 1].second);
    EXPECT_GT(loss[i].second, loss[i - 1].second);
  }
  // Same scale for all curves: loss 2.3 at epoch 1 is far above accuracy 0.1.
  EXPECT_LT(loss[0].second, train_acc[0].second);
}

TEST(SvgPlot, YAxisRunsToTheLargestLossRoundedUp) {
  const std::string svg = svg_plot(history(10), "run");  // largest loss 2.3 -> ticks 0, 0.5, .., 2.5
  EXPECT_THAT(svg, HasSubstr(">2.5</text>"));
  EXPECT_THAT(svg, HasSubstr(">0.0</text>"));
  EXPECT_THAT(svg, testing::Not(HasSubstr(">3.0</text>")));
  std::vector<EpochStats> small{stats(1, 0.4, 0.8, 0.7), stats(2, 0.3, 0.9, 0.8)};
  const std::string unit = svg_plot(small, "run");  // max(1, 0.4) -> 0..1
  EXPECT_THAT(unit, HasSubstr(">1.0</text>"));
  EXPECT_THAT(unit, testing::Not(HasSubstr(">1.2</text>")));
}

TEST(SvgPlot, OneEpochIsASinglePoint) {
  const std::string svg = svg_plot(history(1), "one");
  const auto lines = polylines(svg);
  ASSERT_EQ(lines.size(), 3u);
  for (const auto& line : lines) EXPECT_EQ(line.size(), 1u);
  EXPECT_EQ(count_of(svg, "<circle"), 1 + 1);  // the loss marker plus its legend sample
  EXPECT_THAT(svg, HasSubstr(">1</text>"));
}

TEST(SvgPlot, TitleIsEscaped) {
  const std::string svg = svg_plot(history(2), "a<b & \"c\"");
  EXPECT_THAT(svg, HasSubstr("a&lt;b &amp; &quot;c&quot;"));
  EXPECT_THAT(svg, testing::Not(HasSubstr("a<b")));
}

TEST(SvgPlot, RefusesAnEmptyHistoryAndNonFiniteValues) {
  EXPECT_INVALID_ARGUMENT(svg_plot({}, "t"), "empty training history");
  std::vector<EpochStats> h = history(3);
  h[1].train_loss = std::nan("");
  EXPECT_INVALID_ARGUMENT(svg_plot(h, "t"), "epoch 2: train loss is nan");
}

TEST(SvgPlot, WritesTheFile) {
  TempDir dir;
  const fs::path file = dir.path() / "plot.svg";
  write_svg_plot(file, history(4), "run");
  EXPECT_EQ(read_all(file), svg_plot(history(4), "run"));
}

TEST(SvgPlot, UnwritablePathThrowsNamingThePath) {
  TempDir dir;
  const fs::path file = dir.path() / "no_such_dir" / "plot.svg";
  const std::string message =
      dpt::testing_support::error_of<std::runtime_error>([&] { write_svg_plot(file, history(3), "run"); });
  EXPECT_THAT(message, HasSubstr(file.string()));
  EXPECT_THAT(message, HasSubstr("No such file or directory"));
}

// ----------------------------------------------------------------------------------------------
// ProgressBar

TEST(ProgressBar, NotATerminalPrintsNothing) {
  MemStream out;
  {
    ProgressBar bar(out.file(), /*is_terminal=*/false, 3, 10, 235);
    for (int64_t step = 1; step <= 235; ++step) bar.update(step, 0.5, 0.8);
    bar.finish();
  }
  EXPECT_EQ(out.text(), "");
}

TEST(ProgressBar, TmpfileIsNotATerminal) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  EXPECT_FALSE(ProgressBar::is_terminal(f));
  std::fclose(f);
}

TEST(ProgressBar, TerminalRedrawsOneLineInPlace) {
  MemStream out;
  double now = 100.0;
  ProgressBar bar(out.file(), /*is_terminal=*/true, 3, 10, 235, [&] { return now; });
  now += 12.34;
  bar.update(120, 0.51234, 0.8111);
  const std::string text = out.text();
  EXPECT_EQ(text.front(), '\r');
  EXPECT_THAT(text, HasSubstr("epoch 3/10 ["));
  EXPECT_THAT(text, HasSubstr("] 120/235  loss 0.512  acc 0.811  12.3 s"));
  EXPECT_EQ(count_of(text, "\n"), 0);
  // 120/235 of the 20-character bar is filled.
  EXPECT_THAT(text, HasSubstr("[##########..........]"));
  bar.finish();
  EXPECT_EQ(out.text().back(), '\n');
}

TEST(ProgressBar, RedrawsAtMostTenTimesASecond) {
  MemStream out;
  double now = 0.0;
  ProgressBar bar(out.file(), true, 1, 1, 1000, [&] { return now; });
  // 1000 steps over one second: the first, then one per 0.1 s, and the last.
  for (int64_t step = 1; step <= 1000; ++step) {
    now = step * 0.001;
    bar.update(step, 1.0, 0.5);
  }
  const int redraws = count_of(out.text(), "\r");
  EXPECT_GE(redraws, 10);
  EXPECT_LE(redraws, 12);
  EXPECT_THAT(out.text(), HasSubstr("1000/1000"));
  bar.finish();
  EXPECT_EQ(count_of(out.text(), "\r"), redraws);  // the last step was already drawn
  EXPECT_EQ(count_of(out.text(), "\n"), 1);
}

TEST(ProgressBar, FinishDrawsAThrottledLastState) {
  MemStream out;
  double now = 0.0;
  ProgressBar bar(out.file(), true, 1, 2, 100, [&] { return now; });
  bar.update(1, 2.0, 0.1);
  now = 0.01;
  bar.update(50, 1.23456, 0.4);  // throttled
  EXPECT_THAT(out.text(), testing::Not(HasSubstr("50/100")));
  bar.finish();
  EXPECT_THAT(out.text(), HasSubstr("50/100  loss 1.235"));
  EXPECT_EQ(out.text().back(), '\n');
}

TEST(ProgressBar, RejectsAStepOutsideTheEpoch) {
  MemStream out;
  ProgressBar bar(out.file(), true, 1, 1, 10, [] { return 0.0; });
  EXPECT_INVALID_ARGUMENT(bar.update(11, 0, 0), "step 11 outside 0..10");
}

// --progress: auto follows the terminal but stays off under mpirun; on and off are absolute.
TEST(ShowProgress, AutoIsOnOnlyOnATerminalOutsideMpirun) {
  using dpt::report::show_progress;
  EXPECT_TRUE(show_progress("auto", /*stdout_is_terminal=*/true, /*under_mpirun=*/false));
  EXPECT_FALSE(show_progress("auto", true, true));
  EXPECT_FALSE(show_progress("auto", false, false));
  EXPECT_FALSE(show_progress("auto", false, true));
  for (const bool terminal : {false, true}) {
    for (const bool mpi : {false, true}) {
      EXPECT_TRUE(show_progress("on", terminal, mpi));
      EXPECT_FALSE(show_progress("off", terminal, mpi));
    }
  }
  EXPECT_THROW(show_progress("sometimes", true, false), std::invalid_argument);
}
