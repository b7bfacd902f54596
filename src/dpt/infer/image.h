// Pictures into the network's input: what `dptrain predict` feeds a model trained on
// Fashion-MNIST. A picture file (PNG, PGM, JPEG, BMP, ... of any size; read with
// stb_image) becomes one 28x28 image:
//   1. grey-scale: colour is converted to luminance and alpha dropped (stb_image's rule:
//      (77 R + 150 G + 29 B) / 256);
//   2. polarity: Fashion-MNIST shows a light object on a dark background, so the picture
//      is inverted (255 - v) when the mean of its border pixels (the outermost row and
//      column on each side) is bright, above 127.5: a photo on white paper becomes white on
//      black;
//   3. square: the shorter side is padded with black (the background after step 2) on
//      both sides, so the object keeps its proportions and stays centred;
//   4. resize to 28x28 with stb_image_resize (a Mitchell filter when shrinking);
//   5. scale to [0, 1] (v / 255), as training reads Fashion-MNIST.
// An IDX images file (idx3-ubyte, gzipped or plain, as Fashion-MNIST ships) holds images
// that are already 28x28 with the data set's polarity: each is taken as it is (step 5 only).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace dpt::infer {

inline constexpr int kImageSide = 28;

struct InputImage {
  std::string source;         // "shirt.png", or "t10k-images-idx3-ubyte.gz[17]" for an IDX image
  std::vector<float> pixels;  // 28 * 28 values in [0, 1], row-major
  int width = 0, height = 0;  // of the original picture
  bool inverted = false;      // step 2 inverted it
};

// Steps 1 to 5 on a grey-scale picture of width x height bytes.
InputImage preprocess(const std::vector<uint8_t>& grey, int width, int height, const std::string& source);

// The images in `file`: one for a picture, every image of an IDX file. Throws
// std::runtime_error "cannot read image FILE: REASON" for a file that is neither.
std::vector<InputImage> load_images(const std::filesystem::path& file);

}  // namespace dpt::infer
