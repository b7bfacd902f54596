#include "dpt/infer/evaluation.h"

#include "dpt/data/data_error.h"
#include "dpt/data/transforms.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "dpt/core/config_error.h"
#include "dpt/parallel/data_parallel.h"
#include "dpt/train/svg.h"

namespace dpt::infer {

using train::strprintf;
using train::xml_escape;

int64_t Evaluation::examples() const {
  int64_t n = 0;
  for (int64_t c : confusion) n += c;
  return n;
}

int64_t Evaluation::examples_of(int64_t truth) const {
  int64_t n = 0;
  for (int64_t p = 0; p < classes; ++p) n += count(truth, p);
  return n;
}

int64_t Evaluation::correct() const {
  int64_t n = 0;
  for (int64_t c = 0; c < classes; ++c) n += count(c, c);
  return n;
}

double Evaluation::accuracy() const {
  const int64_t n = examples();
  return n == 0 ? 0.0 : static_cast<double>(correct()) / static_cast<double>(n);
}

double Evaluation::class_accuracy(int64_t truth) const {
  const int64_t n = examples_of(truth);
  return n == 0 ? 0.0 : static_cast<double>(count(truth, truth)) / static_cast<double>(n);
}

std::shared_ptr<const data::Dataset> test_data_for(const data::DataInfo& trained, data::DataOptions options) {
  if (options.image_size == 0 && trained.shape.height == trained.shape.width) options.image_size = trained.shape.height;
  if (options.channels == 0) options.channels = trained.shape.channels;
  options.normalize = options.hflip = false;
  options.random_crop = 0;
  std::shared_ptr<const data::Dataset> test = data::load_data(options).test;
  const data::DataInfo info = test->info();
  if (info.shape != trained.shape || info.classes != trained.classes) {
    throw data::DataError("the model was trained on " + trained.shape.str() + " images in " +
                          std::to_string(trained.classes.size()) + " classes, the test split of '" + options.data_dir +
                          "' holds " + info.shape.str() + " images in " + std::to_string(info.classes.size()) +
                          " classes; pass the `data_dir` it was trained on");
  }
  if (!trained.mean.empty()) test = data::transformed(test, {data::normalize(trained.mean, trained.stddev)});
  return test;
}

Evaluation evaluate(std::unique_ptr<nn::Module> net, const std::vector<Device>& devices, const data::Dataset& data,
                    int64_t batch_size, int cores) {
  if (batch_size < 1) throw ConfigError("batch_size", "`batch_size` must be positive, got " + std::to_string(batch_size));
  if (data.size() == 0) throw std::invalid_argument("there is nothing to evaluate: the data set is empty");
  net->eval();
  parallel::DataParallel parallel_net(std::move(net), devices, parallel::DataParallelOptions{"ring", cores, 0.0, {}});
  parallel_net.eval();
  const int64_t classes = data.num_classes();
  return {classes, parallel_net.confusion_matrix(data, batch_size, classes)};
}

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
  train::write_svg_file(file, confusion_svg(evaluation, class_names, title));
}

}  // namespace dpt::infer
