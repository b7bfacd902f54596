// Pictures into the network's input: what `dptrain predict` feeds a trained model, read as
// its training data was, from what its checkpoint records (data::DataInfo). A picture file
// (JPEG, PNG, PGM, BMP, GIF, TGA, ... of any size; data/pictures.h decodes it) becomes one
// image of the recorded shape:
//   1. channels: brought to the recorded count (grey from colour by luminance,
//      (77 R + 150 G + 29 B) / 256; colour from grey by copying; alpha dropped);
//   2. polarity, only for data recorded as light on dark (the MNIST family): the picture
//      is inverted (255 - v) when the mean of its border pixels (the outermost row and
//      column on each side) is bright, above 127.5: a photo on white paper becomes white on
//      black; it is then padded to a square with black on both sides of the shorter one,
//      so the object keeps its proportions and stays centred, as the family's are;
//   3. resized to the recorded height x width with stb_image_resize (Mitchell when
//      shrinking), as an image folder's pictures were for training;
//   4. scaled to [0, 1] (v / 255), then normalized with the recorded mean and deviation.
// An IDX images file (idx3-ubyte, gzipped or plain) holds images already in the data
// set's form: each is taken as it is (step 4 only); its size must be the recorded one.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "dpt/data/dataset.h"
#include "dpt/data/pictures.h"

namespace dpt::infer {

struct InputImage {
  std::string source;         // "shirt.png", or "t10k-images-idx3-ubyte.gz[17]" for an IDX image
  std::vector<float> pixels;  // the recorded shape's values, channel-major
  int width = 0, height = 0;  // of the original picture
  bool inverted = false;      // step 2 inverted it
};

// Steps 1 to 4 on a decoded picture, for a model trained on `data`.
InputImage preprocess(const data::Picture& picture, const data::DataInfo& data, const std::string& source);

// The images in `file`: one for a picture, every image of an IDX file. Throws
// std::runtime_error "cannot read image FILE: REASON" for a file that is neither.
// Pictures declaring more than `max_pixels` pixels are refused before they are decoded.
std::vector<InputImage> load_images(const std::filesystem::path& file, const data::DataInfo& data,
                                    int64_t max_pixels = data::kDefaultMaxImagePixels);

}  // namespace dpt::infer
