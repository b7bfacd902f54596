#include "dpt/report/evaluation_report.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "dpt/report/svg.h"

namespace dpt::report {

using infer::Evaluation;

std::string evaluation_text(const Evaluation& e, const std::vector<std::string>& names) {
  if (static_cast<int64_t>(names.size()) != e.classes) throw std::invalid_argument("evaluation_text: class names");
  std::string out = strprintf("test accuracy: %.4f (%lld of %lld images)\n", e.accuracy(),
                              static_cast<long long>(e.correct()), static_cast<long long>(e.examples()));
  out += "per class:\n";
  for (int64_t c = 0; c < e.classes; ++c) {
    out += strprintf("  %d %-12s %.4f (%lld of %lld)\n", static_cast<int>(c), names[c].c_str(), e.class_accuracy(c),
                     static_cast<long long>(e.count(c, c)), static_cast<long long>(e.examples_of(c)));
  }
  out += "confusion matrix (rows: true class, columns: predicted class):\n";
  out += strprintf("  %-14s", "");
  for (int64_t p = 0; p < e.classes; ++p) out += strprintf(" %6d", static_cast<int>(p));
  out += "\n";
  for (int64_t t = 0; t < e.classes; ++t) {
    out += strprintf("  %d %-12s", static_cast<int>(t), names[t].c_str());
    for (int64_t p = 0; p < e.classes; ++p) out += strprintf(" %6lld", static_cast<long long>(e.count(t, p)));
    out += "\n";
  }
  return out;
}

namespace {
// Layout in SVG user units: class names left of the rows and above the columns (turned),
// each row's accuracy right of it.
constexpr double kCell = 42, kLeft = 112, kTop = 132, kRightColumn = 78, kBottom = 44;
}  // namespace

std::string confusion_svg(const Evaluation& e, const std::vector<std::string>& names, const std::string& title) {
  if (static_cast<int64_t>(names.size()) != e.classes) throw std::invalid_argument("confusion_svg: class names");
  const double n = static_cast<double>(e.classes);
  const double width = kLeft + n * kCell + kRightColumn, height = kTop + n * kCell + kBottom;
  std::string svg = strprintf(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
      "font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\" font-size=\"11\">\n",
      width, height, width, height);
  svg += "<title>" + xml_escape(title) + "</title>\n";
  svg += strprintf("<rect x=\"0\" y=\"0\" width=\"%.0f\" height=\"%.0f\" fill=\"white\"/>\n", width, height);
  svg += strprintf("<text x=\"%.2f\" y=\"24\" text-anchor=\"middle\" font-size=\"15\" font-weight=\"bold\">%s</text>\n",
                   width / 2, xml_escape(title).c_str());
  svg += strprintf("<text x=\"%.2f\" y=\"44\" text-anchor=\"middle\" font-size=\"12\">accuracy %.4f on %lld images"
                   "</text>\n",
                   width / 2, e.accuracy(), static_cast<long long>(e.examples()));

  // Cells: shaded by the share of the row (the true class) they hold.
  svg += "<g>\n";
  for (int64_t t = 0; t < e.classes; ++t) {
    const int64_t row = e.examples_of(t);
    for (int64_t p = 0; p < e.classes; ++p) {
      const int64_t count = e.count(t, p);
      const double share = row == 0 ? 0.0 : static_cast<double>(count) / static_cast<double>(row);
      const double x = kLeft + static_cast<double>(p) * kCell, y = kTop + static_cast<double>(t) * kCell;
      // White to dark blue; the diagonal in blue, the errors in red.
      const int fade = static_cast<int>(std::lround(255 * (1 - std::sqrt(share))));
      const std::string fill = t == p ? strprintf("rgb(%d,%d,255)", fade, std::min(255, fade + 40))
                                      : strprintf("rgb(255,%d,%d)", fade, fade);
      svg += strprintf("<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"%s\" stroke=\"#ddd\"/>", x,
                       y, kCell, kCell, fill.c_str());
      if (count > 0) {
        svg += strprintf("<text x=\"%.2f\" y=\"%.2f\" dy=\"0.35em\" text-anchor=\"middle\" fill=\"%s\">%lld</text>",
                         x + kCell / 2, y + kCell / 2, share > 0.5 ? "white" : "#222", static_cast<long long>(count));
      }
      svg += "\n";
    }
  }
  svg += "</g>\n";

  // Class names: rows on the left, columns above (turned), accuracy per row on the right.
  svg += "<g fill=\"#333\">\n";
  for (int64_t c = 0; c < e.classes; ++c) {
    const double mid = static_cast<double>(c) * kCell + kCell / 2;
    svg += strprintf("<text x=\"%.2f\" y=\"%.2f\" dy=\"0.35em\" text-anchor=\"end\">%s</text>\n", kLeft - 8,
                     kTop + mid, xml_escape(names[c]).c_str());
    svg += strprintf("<text x=\"0\" y=\"0\" dy=\"0.35em\" transform=\"translate(%.2f %.2f) rotate(-60)\">%s</text>\n",
                     kLeft + mid, kTop - 8, xml_escape(names[c]).c_str());
    svg += strprintf("<text x=\"%.2f\" y=\"%.2f\" dy=\"0.35em\">%.3f</text>\n", kLeft + n * kCell + 8, kTop + mid,
                     e.class_accuracy(c));
  }
  svg += strprintf("<text x=\"%.2f\" y=\"%.2f\" font-weight=\"bold\">acc</text>\n", kLeft + n * kCell + 8, kTop - 8);
  svg += strprintf("<text x=\"%.2f\" y=\"%.2f\" text-anchor=\"middle\" font-size=\"13\">predicted class</text>\n",
                   kLeft + n * kCell / 2, kTop + n * kCell + 28);
  svg += strprintf(
      "<text x=\"0\" y=\"0\" text-anchor=\"middle\" font-size=\"13\" transform=\"translate(16 %.2f) rotate(-90)\">"
      "true class</text>\n",
      kTop + n * kCell / 2);
  svg += "</g>\n</svg>\n";
  return svg;
}

void write_confusion_svg(const std::filesystem::path& file, const Evaluation& evaluation,
                         const std::vector<std::string>& class_names, const std::string& title) {
  write_svg_file(file, confusion_svg(evaluation, class_names, title));
}

}  // namespace dpt::report
