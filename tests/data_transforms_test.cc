// The Dataset interface's contracts: transforms (a flip twice is the identity, a crop
// keeps the shape, normalized statistics are about 0 and 1, what an example becomes does
// not depend on the batch, the shard or the pass that reads it), the in-memory data set
// built from tensors, held-out splits, the .npy parser and picture decoding.
#include <gtest/gtest.h>
#include <stb_image_write.h>

#include <cmath>
#include <filesystem>
#include <numeric>

#include "dpt/data/data_error.h"
#include "dpt/data/in_memory.h"
#include "dpt/data/loader.h"
#include "dpt/data/numpy.h"
#include "dpt/data/pictures.h"
#include "dpt/data/subset.h"
#include "dpt/data/transforms.h"

namespace dpt::data {
namespace {

// n colour examples of 3 x 6 x 5 whose every value differs.
std::shared_ptr<InMemoryDataset> numbered(int64_t n) {
  auto data = std::make_shared<InMemoryDataset>();
  data->channels = 3, data->rows = 6, data->cols = 5;
  for (int64_t i = 0; i < n * 90; ++i) data->pixels.push_back(static_cast<uint8_t>((i * 7 + i / 90) % 251));
  for (int64_t i = 0; i < n; ++i) data->labels.push_back(i % 4);
  data->class_names = {"a", "b", "c", "d"};
  return data;
}

std::vector<float> example(const Dataset& data, int64_t index, const Draw& draw) {
  std::vector<float> out(static_cast<size_t>(data.shape().numel()));
  int64_t label = 0;
  const int64_t indices[] = {index};
  data.fill(indices, draw, out.data(), &label);
  return out;
}

TEST(Transforms, FlipTwiceIsTheIdentity) {
  const auto flip = hflip();
  const ImageShape shape{3, 6, 5};
  const std::vector<float> original = example(*numbered(1), 0, {});
  int flipped = 0;
  for (uint64_t seed = 0; seed < 16; ++seed) {
    std::vector<float> image = original;
    std::mt19937_64 first(seed), second(seed);
    flip->apply(image.data(), shape, first);
    flipped += image != original;
    flip->apply(image.data(), shape, second);
    EXPECT_EQ(image, original) << "seed " << seed;
  }
  EXPECT_GT(flipped, 2) << "a flip with probability 1/2 flipped " << flipped << " of 16";
  EXPECT_LT(flipped, 14);
}

TEST(Transforms, CropKeepsTheShapeAndShiftsTheImage) {
  const auto base = numbered(8);
  const auto cropped = transformed(base, {random_crop(2)});
  EXPECT_EQ(cropped->shape(), base->shape());
  const Draw train{5, 1, true};
  for (int64_t i = 0; i < 8; ++i) {
    const std::vector<float> a = example(*base, i, {}), b = example(*cropped, i, train);
    // Every value of the crop is zero padding or a value of the original image.
    for (float v : b) EXPECT_TRUE(v == 0.0f || std::find(a.begin(), a.end(), v) != a.end());
  }
  EXPECT_EQ(example(*cropped, 3, {5, 1, false}), example(*base, 3, {})) << "evaluation does not augment";
}

TEST(Transforms, NormalizedStatisticsAreZeroAndOne) {
  const auto base = numbered(50);
  const ChannelStats stats = channel_stats(*base);
  ASSERT_EQ(stats.mean.size(), 3u);
  const auto normalized = transformed(base, {normalize(stats.mean, stats.stddev)});
  const ChannelStats after = channel_stats(*normalized);
  for (size_t c = 0; c < 3; ++c) {
    EXPECT_NEAR(after.mean[c], 0.0f, 1e-4);
    EXPECT_NEAR(after.stddev[c], 1.0f, 1e-3);
  }
  EXPECT_EQ(normalized->info().mean, stats.mean) << "the normalization is recorded";
}

// What an example becomes depends on (seed, epoch, index) only: not on the batch it is read
// in, the shard, the device count or a resume. Read whole, by shards of 3, and seeked to.
TEST(Transforms, AnExampleIsTheSameWhateverReadsIt) {
  const auto data = transformed(numbered(12), {random_crop(1), hflip()});
  BatchLoader whole(*data, 12, true, 9, true);
  whole.start_epoch(2);
  Batch all;
  ASSERT_TRUE(whole.next(all));
  std::vector<float> sharded;
  for (int shard = 0; shard < 3; ++shard) {
    BatchLoader part(*data, 12, true, 9, true);
    part.set_shard(shard, 3);
    part.seek(2, 0);  // as a resume positions it
    Batch b;
    ASSERT_TRUE(part.next(b));
    const std::vector<float> v = b.images.to_vector();
    sharded.insert(sharded.end(), v.begin(), v.end());
  }
  EXPECT_EQ(all.images.to_vector(), sharded);
  BatchLoader other_epoch(*data, 12, true, 9, true);
  other_epoch.start_epoch(3);
  Batch later;
  ASSERT_TRUE(other_epoch.next(later));
  EXPECT_NE(all.images.to_vector(), later.images.to_vector()) << "another epoch draws other augmentations";
}

Tensor labels_of(std::vector<int64_t> values) {
  Tensor t = Tensor::empty({static_cast<int64_t>(values.size())}, DType::i64);
  std::copy(values.begin(), values.end(), t.data<int64_t>());
  return t;
}

TEST(InMemory, FromTensorsChecksLabels) {
  const Tensor x = Tensor::from_vector(std::vector<float>(2 * 1 * 2 * 2, 0.5f), {2, 1, 2, 2});
  const InMemoryDataset data = from_tensors(x, labels_of({0, 1}), {"no", "yes"});
  EXPECT_EQ(data.shape(), (ImageShape{1, 2, 2}));
  EXPECT_EQ(data.num_classes(), 2);
  EXPECT_EQ(example(data, 1, {}), std::vector<float>(4, 0.5f));
  try {
    from_tensors(x, labels_of({0, 2}), {"no", "yes"});
    FAIL() << "label 2 of 2 classes was taken";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "from_tensors: label 2 at index 1 is outside the 2 classes given; pass one name per class");
  }
}

TEST(Subset, HoldOutIsSeededDisjointAndComplete) {
  const auto data = numbered(100);
  const SplitPair a = hold_out(data, 0.2, 4), b = hold_out(data, 0.2, 4), c = hold_out(data, 0.2, 5);
  EXPECT_EQ(a.test->size(), 20);
  EXPECT_EQ(a.train->size(), 80);
  EXPECT_EQ(example(*a.test, 7, {}), example(*b.test, 7, {}));
  bool differs = false;
  for (int64_t i = 0; i < 20; ++i) differs |= example(*a.test, i, {}) != example(*c.test, i, {});
  EXPECT_TRUE(differs) << "another seed holds out other examples";
}

// A .npy file as numpy.save writes it (version 1.0, a padded header).
std::vector<uint8_t> npy(const std::string& descr, const std::string& shape, const std::vector<uint8_t>& values) {
  std::string header = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::vector<uint8_t> bytes = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, static_cast<uint8_t>(header.size()), 0};
  bytes.insert(bytes.end(), header.begin(), header.end());
  bytes.insert(bytes.end(), values.begin(), values.end());
  return bytes;
}

TEST(Numpy, ParsesKnownContents) {
  const NpyArray a = parse_npy(npy("|u1", "(2, 3)", {1, 2, 3, 4, 5, 6}), "test.npy");
  EXPECT_EQ(a.dtype, "|u1");
  EXPECT_EQ(a.shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(a.data, (std::vector<uint8_t>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(parse_npy(npy("<i8", "(1,)", {7, 0, 0, 0, 0, 0, 0, 0}), "y.npy").shape, (std::vector<int64_t>{1}));
  try {
    parse_npy(npy("<f4", "(2, 3)", {1, 2, 3}), "short.npy");
    FAIL() << "a cut-off array was taken";
  } catch (const DataError& e) {
    EXPECT_STREQ(e.what(), "NumPy file short.npy holds 3 data bytes where its header declares 6 values of '<f4'; it "
                           "is cut short or damaged, save it again");
  }
}

TEST(Pictures, PngRoundTripAndChannels) {
  const std::filesystem::path file = std::filesystem::temp_directory_path() / "dpt_pictures_test.png";
  const uint8_t rgb[] = {255, 0, 0, 0, 255, 0, 0, 0, 255, 10, 20, 30};  // 2 x 2
  ASSERT_NE(stbi_write_png(file.c_str(), 2, 2, 3, rgb, 6), 0);
  const Picture p = decode_picture(read_file(file), file.string());
  EXPECT_EQ(p.width, 2);
  EXPECT_EQ(p.channels, 3);
  EXPECT_EQ(p.pixels, std::vector<uint8_t>(rgb, rgb + 12));
  EXPECT_EQ(picture_channels(file), 3);
  const Picture grey = with_channels(p, 1);
  EXPECT_EQ(grey.pixels[0], (255 * 77) >> 8);  // BT.601 luma, as stb_image computes it
  uint8_t chw[12];
  to_chw(p, chw);
  EXPECT_EQ(chw[0], 255);  // red plane first
  EXPECT_EQ(chw[4], 0);    // green plane: pixel 0 has none
  EXPECT_EQ(from_chw(chw, 3, 2, 2).pixels, p.pixels);
  std::filesystem::remove(file);
  try {
    decode_picture({1, 2, 3}, "junk.png");
    FAIL() << "three bytes decoded";
  } catch (const DataError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("cannot decode picture junk.png: stb_image: ", 0), 0u) << e.what();
  }
}

}  // namespace
}  // namespace dpt::data
