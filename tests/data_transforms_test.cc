// The Dataset interface's contracts: transforms (a flip twice is the identity, a crop
// keeps the shape, normalized statistics are about 0 and 1, what an example becomes does
// not depend on the batch, the shard or the pass that reads it), the in-memory data set
// built from tensors, held-out splits, the .npy parser, picture decoding, the prefetching
// loader (the same batches as without it) and an image folder's cache (the same floats).
#include <gtest/gtest.h>
#include <stb_image_write.h>

#include <climits>
#include <cmath>
#include <filesystem>
#include <numeric>

#include "dpt/data/data_error.h"
#include "dpt/data/image_folder.h"
#include "dpt/data/in_memory.h"
#include "dpt/data/loader.h"
#include "dpt/data/numpy.h"
#include "dpt/data/pictures.h"
#include "dpt/data/subset.h"
#include "dpt/data/transforms.h"
#include "test_support.h"

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
  std::string raw("\x93NUMPY\x01\x00", 8);
  raw += static_cast<char>(header.size());
  raw += '\0';
  raw += header;
  std::vector<uint8_t> bytes(raw.begin(), raw.end());
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
    EXPECT_STREQ(e.what(), "NumPy file short.npy holds 3 data bytes where its header declares shape (2, 3) of '<f4' "
                           "(6 values); it is cut short or damaged, save it again");
  }
}

// Crafted headers: a shape whose product wraps past 2^64 (to 0, which 0 data bytes would
// match), a dimension past int64, a dtype of Python objects. Each is refused by name, never
// allocated or indexed.
TEST(Numpy, RefusesShapesThatOverflowAndObjects) {
  EXPECT_EQ(dpt::testing_support::error_of<DataError>(
                [] { parse_npy(npy("|u1", "(2305843009213693952, 16, 16)", {}), "wrap.npy"); }),
            "NumPy file wrap.npy holds 0 data bytes where its header declares shape (2305843009213693952, 16, 16) of "
            "'|u1' (more than 2^64 values); it is cut short or damaged, save it again");
  EXPECT_EQ(dpt::testing_support::error_of<DataError>(
                [] { parse_npy(npy("<f4", "(4611686018427387904, 4)", {}), "wrap4.npy"); }),
            "NumPy file wrap4.npy holds 0 data bytes where its header declares shape (4611686018427387904, 4) of '<f4' "
            "(more than 2^64 values); it is cut short or damaged, save it again");
  EXPECT_EQ(dpt::testing_support::error_of<DataError>(
                [] { parse_npy(npy("|u1", "(99999999999999999999,)", {}), "huge.npy"); }),
            "NumPy file huge.npy declares a dimension of 99999999999999999999, more than any array holds; it is "
            "damaged, save it again");
  EXPECT_EQ(dpt::testing_support::error_of<DataError>([] { parse_npy(npy("|O", "(2,)", {}), "objects.npy"); }),
            "NumPy file objects.npy has dtype '|O' (Python objects), which dptrain does not read; save numbers, "
            "little-endian: images as uint8 or float32, labels as int64 (e.g. numpy.save(f, a.astype('int64')))");
}

TEST(Pictures, RefuseMorePixelsThanTheLimitFromTheHeader) {
  const std::filesystem::path file = std::filesystem::temp_directory_path() / "dpt_pictures_limit.png";
  const uint8_t grey[12] = {};
  ASSERT_NE(stbi_write_png(file.c_str(), 4, 3, 1, grey, 4), 0);
  EXPECT_EQ(decode_picture(read_file(file), "p.png", 12).width, 4) << "12 pixels are within a limit of 12";
  EXPECT_EQ(dpt::testing_support::error_of<DataError>([&] { decode_picture(read_file(file), "p.png", 11); }),
            "picture p.png declares 4x3 pixels (12), more than the limit of 11 (`max_image_pixels`): a damaged header "
            "or a decompression bomb; if the picture is real, raise `max_image_pixels`");
  EXPECT_EQ(read_picture_header(file).width, 4);
  EXPECT_EQ(read_picture_header(file).height, 3);
  std::filesystem::remove(file);
}

// Classes numbered from labels (no classes.txt): every number up to the largest label needs
// an example, else a stray label would make classes nothing is trained on.
TEST(Classes, NumberedFromLabelsNeedAnExampleEach) {
  EXPECT_EQ(classes_of_labels({2, 0, 1, 1}, "'d'", "d/classes.txt"), (std::vector<std::string>{"0", "1", "2"}));
  std::vector<int64_t> labels;
  for (int i = 0; i < 40; ++i) labels.push_back(i % 10);
  labels.push_back(12);
  EXPECT_EQ(dpt::testing_support::error_of<DataError>([&] { classes_of_labels(labels, "'d'", "d/classes.txt"); }),
            "the training labels of 'd' run up to 12, but 2 of the classes 0-12 have no training example (10, 11): a "
            "damaged label, or classes without examples; name the classes in 'd/classes.txt', one per line, to train "
            "on them anyway");
  labels.back() = INT64_MAX;  // no allocation for it, no overflow
  EXPECT_EQ(dpt::testing_support::error_of<DataError>([&] { classes_of_labels(labels, "'d'", "d/classes.txt"); }),
            "the training labels of 'd' run up to 9223372036854775807, more classes than its 41 training examples can "
            "cover: a damaged label, or classes without examples; name the classes in 'd/classes.txt', one per line, "
            "to train on them anyway");
}

TEST(Names, Utf8AndPrintable) {
  EXPECT_TRUE(is_utf8("caf\xc3\xa9 \xf0\x9f\x98\x80"));
  EXPECT_FALSE(is_utf8("b\xff" "ag"));
  EXPECT_FALSE(is_utf8("\xc3")) << "cut short";
  EXPECT_FALSE(is_utf8("\xc0\x80")) << "overlong";
  EXPECT_FALSE(is_utf8("\xed\xa0\x80")) << "a surrogate";
  EXPECT_EQ(printable("b\xff" "ag caf\xc3\xa9\x01"), "b\\xffag caf\xc3\xa9\\x01");
}

TEST(Pictures, PngRoundTripAndChannels) {
  const std::filesystem::path file = std::filesystem::temp_directory_path() / "dpt_pictures_test.png";
  const uint8_t rgb[] = {255, 0, 0, 0, 255, 0, 0, 0, 255, 10, 20, 30};  // 2 x 2
  ASSERT_NE(stbi_write_png(file.c_str(), 2, 2, 3, rgb, 6), 0);
  const Picture p = decode_picture(read_file(file), file.string());
  EXPECT_EQ(p.width, 2);
  EXPECT_EQ(p.channels, 3);
  EXPECT_EQ(p.pixels, std::vector<uint8_t>(rgb, rgb + 12));
  EXPECT_EQ(read_picture_header(file).channels, 3);
  EXPECT_TRUE(read_picture_header(file).ends_whole);
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
    EXPECT_STREQ(e.what(), "cannot decode picture junk.png: it is not a picture dptrain reads (JPEG, PNG, BMP, GIF, "
                           "TGA, PNM)");
  }
}


// Every batch of two epochs, with a seek into the middle of the second: what a resumed
// training loop asks for.
std::vector<std::vector<float>> loader_pass(const Dataset& data, int prefetch, int threads, int64_t shard, int64_t shards) {
  BatchLoader loader(data, 2, /*shuffle=*/true, /*seed=*/3, /*augment=*/true);
  loader.set_threads(threads);
  if (shards > 1) loader.set_shard(shard, shards);
  loader.set_prefetch(prefetch);
  std::vector<std::vector<float>> out;
  Batch b;
  for (const auto& [epoch, at] : {std::pair<int64_t, int64_t>{0, 0}, {1, 0}, {1, 3}, {2, 5}}) {
    loader.seek(epoch, at);
    for (int taken = 0; taken < 4 && loader.next(b); ++taken) {
      const float* p = b.images.data<float>();
      std::vector<float> batch(p, p + b.images.numel());
      const int64_t* l = b.labels.data<int64_t>();
      for (int64_t i = 0; i < b.labels.numel(); ++i) batch.push_back(static_cast<float>(l[i]));
      out.push_back(std::move(batch));
    }
  }
  return out;
}

TEST(Prefetch, GivesTheBatchesTheLoaderWouldFill) {
  const auto data = transformed(numbered(61), {random_crop(2), hflip()});
  const auto plain = loader_pass(*data, 0, 1, 0, 1);
  ASSERT_EQ(plain.size(), 16u);  // 4 batches of 2 from each of the 4 positions
  EXPECT_EQ(loader_pass(*data, 1, 1, 0, 1), plain);
  EXPECT_EQ(loader_pass(*data, 3, 2, 0, 1), plain);
  EXPECT_EQ(loader_pass(*data, 2, 2, 1, 2), loader_pass(*data, 0, 1, 1, 2));  // a shard, too
}

// A data set whose example 5 cannot be filled.
class Failing : public Dataset {
 public:
  int64_t size() const override { return 20; }
  DataInfo info() const override { return {{1, 1, 1}, {"a"}, false, {}, {}}; }
  void fill(std::span<const int64_t> indices, const Draw&, float* images, int64_t* labels) const override {
    for (size_t i = 0; i < indices.size(); ++i) {
      if (indices[i] == 5) throw DataError("example 5 is broken");
      images[i] = 0, labels[i] = 0;
    }
  }
};

TEST(Prefetch, AFailingBatchThrowsFromNext) {
  const Failing data;
  BatchLoader loader(data, 4, /*shuffle=*/false, 0);
  loader.set_prefetch(2);
  Batch b;
  EXPECT_TRUE(loader.next(b));  // examples 0..3
  try {
    loader.next(b);
    FAIL() << "the batch holding example 5 was filled";
  } catch (const DataError& e) {
    EXPECT_STREQ(e.what(), "example 5 is broken");
  }
}

// A folder of 12 coloured 9 x 7 PNG pictures in two classes, each one's pixels unlike the
// others', named after the test (ctest runs tests at once).
std::filesystem::path picture_folder(const std::string& test) {
  const std::filesystem::path root = std::filesystem::temp_directory_path() / ("dpt_folder_cache_" + test);
  std::filesystem::remove_all(root);
  for (int i = 0; i < 12; ++i) {
    const std::filesystem::path dir = root / (i % 2 ? "odd" : "even");
    std::filesystem::create_directories(dir);
    std::vector<uint8_t> rgb(9 * 7 * 3);
    for (size_t p = 0; p < rgb.size(); ++p) rgb[p] = static_cast<uint8_t>((p * 13 + static_cast<size_t>(i) * 29) % 256);
    stbi_write_png((dir / (std::to_string(i) + ".png")).c_str(), 9, 7, 3, rgb.data(), 9 * 3);
  }
  return root;
}

TEST(ImageFolderCache, HoldsWhatFitsAndFillsTheSameFloats) {
  const std::filesystem::path root = picture_folder("holds");
  const ImageFolder streamed(root, {});
  ImageFolderOptions cached_options;
  cached_options.cache_bytes = 5 * 9 * 7 * 3 + 10;  // room for 5 pictures
  const ImageFolder cached(root, cached_options);
  EXPECT_EQ(streamed.cacheable_examples(), 0);
  EXPECT_EQ(cached.cacheable_examples(), 5);
  EXPECT_EQ(cached.shape().str(), "3x7x9");
  // Three passes on 2 threads: the first fills the cache, the others read it.
  const auto reference = loader_pass(streamed, 0, 1, 0, 1);
  EXPECT_EQ(loader_pass(cached, 2, 2, 0, 1), reference);
  EXPECT_EQ(loader_pass(cached, 0, 1, 0, 1), reference);
  std::filesystem::remove_all(root);
}

TEST(ImageFolderCache, APictureCutShortIsFoundWhenOpened) {
  const std::filesystem::path root = picture_folder("cut");
  const std::filesystem::path cut = root / "odd" / "1.png";
  std::filesystem::resize_file(cut, std::filesystem::file_size(cut) - 20);
  EXPECT_FALSE(read_picture_header(cut).ends_whole);
  EXPECT_EQ(read_picture_header(cut).channels, 3) << "its header still reads";
  EXPECT_TRUE(read_picture_header(root / "odd" / "3.png").ends_whole);
  try {
    const ImageFolder folder(root, {});
    FAIL() << "a cut PNG was taken";
  } catch (const DataError& e) {
    EXPECT_EQ(std::string(e.what()), "cannot decode picture '" + cut.string() +
                                         "': the file ends before the picture does (cut short); remove it, or pass "
                                         "`on_bad_image` skip to leave such pictures out");
  }
  ImageFolderOptions skip;
  skip.on_bad_image = OnBadImage::skip;
  std::string warned;
  skip.warn = [&](const std::string& m) { warned = m; };
  EXPECT_EQ(ImageFolder(root, skip).size(), 11);
  EXPECT_EQ(warned, "left out 1 picture(s) of '" + root.string() + "' that do not decode (`on_bad_image` skip)");
  std::filesystem::remove_all(root);
}

}  // namespace
}  // namespace dpt::data
