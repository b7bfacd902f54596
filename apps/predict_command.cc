// `dptrain predict`: the top-k classes of pictures (or IDX images) with their probabilities.
#include <cstdio>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "dpt/core/config_error.h"
#include "dpt/infer/image.h"
#include "dpt/infer/model.h"
#include "dpt/infer/predict.h"

namespace dpt::cli {

int run_predict(const PredictSettings& s, const Wording& wording) {
  return reporting_errors(wording, [&] {
    infer::TrainedModel trained = infer::load_trained(s.checkpoint);
    const std::vector<std::string>& names = trained.data.classes;
    if (s.top_k < 1 || s.top_k > static_cast<int>(names.size())) {
      throw ConfigError("top_k", "`top_k` must be between 1 and " + std::to_string(names.size()) + ", got " +
                                     std::to_string(s.top_k));
    }
    std::vector<infer::InputImage> images;  // all read first: a bad file stops before any output
    for (const std::string& file : s.images) {
      for (infer::InputImage& image : infer::load_images(file, trained.data, s.max_image_pixels)) images.push_back(std::move(image));
    }
    const std::vector<infer::Prediction> predictions = infer::predict(*trained.net, images, trained.data.shape);
    for (size_t i = 0; i < images.size(); ++i) {
      const infer::InputImage& image = images[i];
      const infer::Prediction& p = predictions[i];
      if (s.json) {
        nlohmann::ordered_json line;
        line["image"] = image.source;
        line["width"] = image.width;
        line["height"] = image.height;
        line["inverted"] = image.inverted;
        nlohmann::ordered_json top = nlohmann::ordered_json::array();
        for (int k = 0; k < s.top_k; ++k) {
          const int64_t c = p.ranked[static_cast<size_t>(k)];
          top.push_back({{"class", c}, {"name", names[static_cast<size_t>(c)]}, {"probability", p.probabilities[c]}});
        }
        line["top"] = top;
        line["logits"] = p.logits;
        std::printf("%s\n", line.dump().c_str());
      } else {
        std::string text;
        for (int k = 0; k < s.top_k; ++k) {
          const int64_t c = p.ranked[static_cast<size_t>(k)];
          char figure[32];
          std::snprintf(figure, sizeof figure, " %.3f", p.probabilities[c]);
          text += (k == 0 ? "" : ", ") + names[static_cast<size_t>(c)] + figure;
        }
        std::printf("%s (%dx%d%s): %s\n", image.source.c_str(), image.width, image.height,
                    image.inverted ? ", inverted" : "", text.c_str());
      }
    }
    return 0;
  });
}

}  // namespace dpt::cli
