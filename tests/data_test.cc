// Tests for src/dpt/data: the IDX reader, the Fashion-MNIST loader and the BatchLoader.
// Every test writes its own small IDX files with known contents, so the expected values
// are exact; one test also reads the real data set when it is installed.
#include <gtest/gtest.h>
#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "dpt/data/data_error.h"
#include "dpt/data/idx_dataset.h"
#include "dpt/data/idx.h"
#include "dpt/data/loader.h"
#include "test_support.h"

namespace fs = std::filesystem;
using dpt::DType;
using dpt::Shape;
using namespace dpt::data;

namespace {

// A fresh directory per test, removed afterwards so runs never see each other's files.
class TempDir {
 public:
  TempDir() {
    const auto* test = ::testing::UnitTest::GetInstance()->current_test_info();
    std::random_device entropy;
    path_ =
        fs::temp_directory_path() / ("dpt_data_test_" + std::string(test->name()) + "_" + std::to_string(entropy()));
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const fs::path& path() const { return path_; }
  fs::path operator/(const std::string& name) const { return path_ / name; }

 private:
  fs::path path_;
};

using Bytes = std::vector<uint8_t>;

// An unsigned-byte IDX file: magic 0x00 0x00 0x08 <ndims>, big-endian dims, values.
Bytes idx_bytes(const std::vector<uint32_t>& dims, const Bytes& values) {
  Bytes out = {0, 0, 0x08, static_cast<uint8_t>(dims.size())};
  for (uint32_t d : dims) {
    for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<uint8_t>(d >> shift));
  }
  out.insert(out.end(), values.begin(), values.end());
  return out;
}

void write_plain(const fs::path& file, const Bytes& bytes) {
  std::ofstream out(file, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << file;
}

void write_gzip(const fs::path& file, const Bytes& bytes) {
  gzFile out = gzopen(file.c_str(), "wb");
  ASSERT_NE(out, nullptr) << file;
  ASSERT_EQ(gzwrite(out, bytes.data(), static_cast<unsigned>(bytes.size())), static_cast<int>(bytes.size()));
  ASSERT_EQ(gzclose(out), Z_OK);
}

Bytes read_bytes(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(in), {});
}

// The message of the DataError `action` throws, or a note that it threw none.
std::string data_error_of(const std::function<void()>& action) {
  try {
    action();
  } catch (const DataError& e) {
    return e.what();
  }
  return "<no DataError thrown>";
}

::testing::AssertionResult contains(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "'" << text << "' does not contain '" << part << "'";
}

Bytes counting_values(size_t n) {
  Bytes values(n);
  for (size_t i = 0; i < n; ++i) values[i] = static_cast<uint8_t>(i * 7 % 256);
  return values;
}

// Compressible but not trivial, so the gzip stream is made of Huffman-coded blocks.
Bytes patterned_values(size_t n) {
  Bytes values(n);
  for (size_t i = 0; i < n; ++i) values[i] = static_cast<uint8_t>((i % 17) * (i % 5) + i / 100);
  return values;
}

}  // namespace

// ---------------------------------------------------------------------------------------
// IDX reader

TEST(IdxReader, ReadsPlainFile) {
  TempDir dir;
  const Bytes values = counting_values(2 * 3 * 4);
  write_plain(dir / "a.idx", idx_bytes({2, 3, 4}, values));
  const IdxArray array = read_idx(dir / "a.idx");
  EXPECT_EQ(array.dims, (std::vector<int64_t>{2, 3, 4}));
  EXPECT_EQ(array.values, values);
}

TEST(IdxReader, ReadsGzipFile) {
  TempDir dir;
  const Bytes values = patterned_values(5000);
  write_gzip(dir / "a.idx.gz", idx_bytes({5000}, values));
  ASSERT_LT(fs::file_size(dir / "a.idx.gz"), 5000u);  // really compressed
  const IdxArray array = read_idx(dir / "a.idx.gz");
  EXPECT_EQ(array.dims, (std::vector<int64_t>{5000}));
  EXPECT_EQ(array.values, values);
}

TEST(IdxReader, ReadsEmptyArray) {
  TempDir dir;
  write_plain(dir / "empty.idx", idx_bytes({0, 28, 28}, {}));
  const IdxArray array = read_idx(dir / "empty.idx");
  EXPECT_EQ(array.dims, (std::vector<int64_t>{0, 28, 28}));
  EXPECT_TRUE(array.values.empty());
}

TEST(IdxReader, MissingFile) {
  TempDir dir;
  const fs::path file = dir / "nope.idx";
  EXPECT_EQ(data_error_of([&] { read_idx(file); }),
            "IDX file '" + file.string() + "': file does not exist; check the path");
}

TEST(IdxReader, WrongMagicNumber) {
  TempDir dir;
  write_plain(dir / "bad.idx", {0x12, 0x34, 0x08, 0x01, 0, 0, 0, 1, 7});
  EXPECT_EQ(data_error_of([&] { read_idx(dir / "bad.idx"); }),
            "IDX file '" + (dir / "bad.idx").string() +
                "': wrong magic number 0x12340801, expected 0x0000TTDD (TT = element type, "
                "DD = number of dimensions); this is not an IDX file");
}

TEST(IdxReader, UnsupportedElementType) {
  TempDir dir;
  write_plain(dir / "float.idx", {0x00, 0x00, 0x0D, 0x01, 0, 0, 0, 1, 0, 0, 0, 0});
  EXPECT_EQ(data_error_of([&] { read_idx(dir / "float.idx"); }),
            "IDX file '" + (dir / "float.idx").string() +
                "': element type 0x0D is not supported, only 0x08 (unsigned byte) is; "
                "use an unsigned-byte IDX file");
}

TEST(IdxReader, FileShorterThanHeader) {
  TempDir dir;
  write_plain(dir / "tiny.idx", {0x00, 0x00});
  EXPECT_EQ(data_error_of([&] { read_idx(dir / "tiny.idx"); }),
            "IDX file '" + (dir / "tiny.idx").string() +
                "': file is shorter than the 4-byte IDX header; it is truncated or not an IDX file");
}

TEST(IdxReader, TruncatedPlainFile) {
  TempDir dir;
  Bytes bytes = idx_bytes({2, 3, 4}, counting_values(24));
  bytes.resize(bytes.size() - 5);
  write_plain(dir / "short.idx", bytes);
  EXPECT_EQ(data_error_of([&] { read_idx(dir / "short.idx"); }),
            "IDX file '" + (dir / "short.idx").string() +
                "': file is truncated: header dimensions [2, 3, 4] need 24 values but only 19 "
                "follow; re-download or reinstall it");
}

TEST(IdxReader, TruncatedHeaderDims) {
  TempDir dir;
  write_plain(dir / "short.idx", {0x00, 0x00, 0x08, 0x03, 0, 0, 0, 2, 0, 0});
  EXPECT_EQ(data_error_of([&] { read_idx(dir / "short.idx"); }),
            "IDX file '" + (dir / "short.idx").string() +
                "': file ends inside the header (3 dimensions declared); it is truncated, "
                "re-download or reinstall it");
}

// Documented choice: bytes beyond the declared values are an error, not ignored.
TEST(IdxReader, ExtraDataAfterValues) {
  TempDir dir;
  Bytes bytes = idx_bytes({4}, {1, 2, 3, 4});
  bytes.push_back(5);
  write_plain(dir / "long.idx", bytes);
  EXPECT_EQ(data_error_of([&] { read_idx(dir / "long.idx"); }),
            "IDX file '" + (dir / "long.idx").string() +
                "': file has data after the 4 values that header dimensions [4] declare; "
                "it is corrupt or not an IDX file");
}

TEST(IdxReader, GzipWithTailCutOff) {
  TempDir dir;
  write_gzip(dir / "full.gz", idx_bytes({5000}, patterned_values(5000)));
  Bytes gz = read_bytes(dir / "full.gz");
  gz.resize(gz.size() / 2);
  write_plain(dir / "cut.gz", gz);
  EXPECT_EQ(data_error_of([&] { read_idx(dir / "cut.gz"); }),
            "IDX file '" + (dir / "cut.gz").string() +
                "': gzip stream is truncated (zlib: unexpected end of file); the file was cut off, "
                "re-download or reinstall it");
}

// All values decompress fine; only the CRC/length trailer is missing.
TEST(IdxReader, GzipWithTrailerCutOff) {
  TempDir dir;
  write_gzip(dir / "full.gz", idx_bytes({5000}, patterned_values(5000)));
  Bytes gz = read_bytes(dir / "full.gz");
  gz.resize(gz.size() - 4);
  write_plain(dir / "cut.gz", gz);
  EXPECT_EQ(data_error_of([&] { read_idx(dir / "cut.gz"); }),
            "IDX file '" + (dir / "cut.gz").string() +
                "': gzip stream is truncated (zlib: unexpected end of file); the file was cut off, "
                "re-download or reinstall it");
}

TEST(IdxReader, GzipWithGarbageInTheMiddle) {
  TempDir dir;
  write_gzip(dir / "full.gz", idx_bytes({5000}, patterned_values(5000)));
  Bytes gz = read_bytes(dir / "full.gz");
  for (size_t i = gz.size() / 2; i < gz.size() / 2 + 16; ++i) gz[i] = static_cast<uint8_t>(0xA5 ^ i);
  write_plain(dir / "garbled.gz", gz);
  // zlib's wording depends on where the damage lands (bad code, CRC mismatch), so only
  // our part of the message is pinned.
  const std::string message = data_error_of([&] { read_idx(dir / "garbled.gz"); });
  EXPECT_TRUE(contains(message, "IDX file '" + (dir / "garbled.gz").string() + "': gzip stream is corrupt (zlib: "));
  EXPECT_TRUE(contains(message, "); re-download or reinstall the file"));
}

// ---------------------------------------------------------------------------------------
// Fashion-MNIST files

namespace {

// Writes a split with `n` images of 2x3 pixels (pixel p of image i = i*6 + p) and the
// given labels; images gzipped, labels plain, so both file names are exercised.
void write_split(const TempDir& dir, const std::string& prefix, uint32_t n, const Bytes& labels) {
  Bytes pixels(n * 6);
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<uint8_t>(i);
  write_gzip(dir / (prefix + "-images-idx3-ubyte.gz"), idx_bytes({n, 2, 3}, pixels));
  write_plain(dir / (prefix + "-labels-idx1-ubyte"), idx_bytes({static_cast<uint32_t>(labels.size())}, labels));
}

}  // namespace

TEST(FashionMnist, LoadsBothSplitsWithGzipAndPlainNames) {
  TempDir dir;
  write_split(dir, "train", 4, {3, 0, 9, 1});
  write_split(dir, "t10k", 2, {5, 7});

  const InMemoryDataset train = load_fashion_mnist(dir.path(), Split::train);
  EXPECT_EQ(train.size(), 4);
  EXPECT_EQ(train.rows, 2);
  EXPECT_EQ(train.cols, 3);
  EXPECT_EQ(train.labels, (std::vector<int64_t>{3, 0, 9, 1}));
  ASSERT_EQ(train.pixels.size(), 24u);
  for (size_t i = 0; i < train.pixels.size(); ++i) EXPECT_EQ(train.pixels[i], i);

  const InMemoryDataset test = load_fashion_mnist(dir.path(), Split::test);
  EXPECT_EQ(test.size(), 2);
  EXPECT_EQ(test.labels, (std::vector<int64_t>{5, 7}));
  EXPECT_EQ(test.pixels.size(), 12u);
}

TEST(FashionMnist, ClassNames) {
  EXPECT_EQ(class_names(), (std::vector<std::string>{"t-shirt", "trouser", "pullover", "dress", "coat", "sandal",
                                                     "shirt", "sneaker", "bag", "ankle boot"}));
}

TEST(FashionMnist, MissingDirectory) {
  TempDir dir;
  const fs::path missing = dir / "no-such-dir";
  EXPECT_EQ(data_error_of([&] { load_fashion_mnist(missing, Split::train); }),
            "Fashion-MNIST directory '" + missing.string() +
                "' does not exist; install the Debian package dataset-fashion-mnist "
                "(apt-get install dataset-fashion-mnist) or pass `data_dir` DIR");
}

TEST(FashionMnist, MissingFile) {
  TempDir dir;
  write_split(dir, "train", 2, {1, 2});
  fs::remove(dir / "train-labels-idx1-ubyte");
  EXPECT_EQ(data_error_of([&] { load_fashion_mnist(dir.path(), Split::train); }),
            "Fashion-MNIST file 'train-labels-idx1-ubyte.gz' (or 'train-labels-idx1-ubyte') is missing in '" +
                dir.path().string() +
                "'; reinstall the Debian package dataset-fashion-mnist or pass `data_dir` DIR with a complete copy");
}

TEST(FashionMnist, CountMismatch) {
  TempDir dir;
  write_split(dir, "t10k", 3, {1, 2});
  EXPECT_EQ(data_error_of([&] { load_fashion_mnist(dir.path(), Split::test); }),
            "Fashion-MNIST test split is inconsistent: '" + (dir / "t10k-images-idx3-ubyte.gz").string() +
                "' holds 3 images but '" + (dir / "t10k-labels-idx1-ubyte").string() +
                "' holds 2 labels; the files come from different copies, reinstall dataset-fashion-mnist");
}

TEST(FashionMnist, LabelOutOfRange) {
  TempDir dir;
  write_split(dir, "train", 3, {1, 10, 2});
  EXPECT_EQ(data_error_of([&] { load_fashion_mnist(dir.path(), Split::train); }),
            "Fashion-MNIST labels file '" + (dir / "train-labels-idx1-ubyte").string() +
                "': label at index 1 is 10, outside the class range 0-9; the file is corrupt, "
                "reinstall dataset-fashion-mnist");
}

TEST(FashionMnist, ImagesNotThreeDimensional) {
  TempDir dir;
  write_split(dir, "train", 2, {1, 2});
  write_gzip(dir / "train-images-idx3-ubyte.gz", idx_bytes({2, 6}, counting_values(12)));
  EXPECT_EQ(data_error_of([&] { load_fashion_mnist(dir.path(), Split::train); }),
            "Fashion-MNIST images file '" + (dir / "train-images-idx3-ubyte.gz").string() +
                "' has dimensions [2, 6], expected 3 (count, rows, cols); it is not an images file, "
                "check the file names");
}

TEST(FashionMnist, LabelsNotOneDimensional) {
  TempDir dir;
  write_split(dir, "train", 2, {1, 2});
  write_plain(dir / "train-labels-idx1-ubyte", idx_bytes({2, 1}, {1, 2}));
  EXPECT_EQ(data_error_of([&] { load_fashion_mnist(dir.path(), Split::train); }),
            "Fashion-MNIST labels file '" + (dir / "train-labels-idx1-ubyte").string() +
                "' has dimensions [2, 1], expected 1 (count); it is not a labels file, check the file names");
}

TEST(FashionMnist, RealDataSet) {
  const fs::path dir = DPT_DATA_DIR;
  DPT_SKIP_WITHOUT_DATA();
  for (const auto& [split, expected_size] : {std::pair{Split::train, 60000}, std::pair{Split::test, 10000}}) {
    const InMemoryDataset data = load_fashion_mnist(dir, split);
    EXPECT_EQ(data.size(), expected_size);
    EXPECT_EQ(data.rows, 28);
    EXPECT_EQ(data.cols, 28);
    EXPECT_EQ(data.pixels.size(), static_cast<size_t>(expected_size) * 28 * 28);
    std::vector<int64_t> per_class(10, 0);
    for (int64_t label : data.labels) {
      ASSERT_GE(label, 0);
      ASSERT_LE(label, 9);
      ++per_class[static_cast<size_t>(label)];
    }
    for (int64_t c = 0; c < 10; ++c) EXPECT_GT(per_class[static_cast<size_t>(c)], 0) << "class " << c;
  }
}

// ---------------------------------------------------------------------------------------
// BatchLoader

namespace {

// n images of 1x2 pixels that encode their own index (low byte, high byte), so a batch
// tells which examples it holds; label = index % 10.
InMemoryDataset indexed_dataset(int64_t n) {
  InMemoryDataset data;
  data.rows = 1;
  data.cols = 2;
  for (int64_t i = 0; i < n; ++i) {
    data.pixels.push_back(static_cast<uint8_t>(i % 256));
    data.pixels.push_back(static_cast<uint8_t>(i / 256));
    data.labels.push_back(i % 10);
  }
  return data;
}

std::vector<int64_t> example_ids(const Batch& batch) {
  std::vector<int64_t> ids;
  const float* pixels = batch.images.data<float>();
  for (int64_t b = 0; b < batch.images.dim(0); ++b) {
    ids.push_back(std::lround(pixels[2 * b] * 255.0f) + 256 * std::lround(pixels[2 * b + 1] * 255.0f));
  }
  return ids;
}

std::vector<int64_t> epoch_ids(BatchLoader& loader, int64_t epoch) {
  loader.start_epoch(epoch);
  std::vector<int64_t> ids;
  Batch batch;
  while (loader.next(batch)) {
    const std::vector<int64_t> batch_ids = example_ids(batch);
    ids.insert(ids.end(), batch_ids.begin(), batch_ids.end());
  }
  return ids;
}

}  // namespace

TEST(BatchLoader, BatchShapesAndLastPartialBatch) {
  const InMemoryDataset data = indexed_dataset(60000);
  BatchLoader loader(data, 256, /*shuffle=*/true, /*seed=*/1);
  EXPECT_EQ(loader.num_examples(), 60000);
  EXPECT_EQ(loader.num_batches(), 235);
  Batch batch;
  int64_t batches = 0;
  while (loader.next(batch)) {
    ++batches;
    const int64_t expected = batches <= 234 ? 256 : 96;
    ASSERT_EQ(batch.images.shape(), (Shape{expected, 1, 1, 2}));
    ASSERT_EQ(batch.images.dtype(), DType::f32);
    ASSERT_EQ(batch.labels.shape(), (Shape{expected}));
    ASSERT_EQ(batch.labels.dtype(), DType::i64);
  }
  EXPECT_EQ(batches, 235);
  EXPECT_FALSE(loader.next(batch));
}

TEST(BatchLoader, ScalesPixelsToUnitRangeAndKeepsLabels) {
  InMemoryDataset data;
  data.rows = 2;
  data.cols = 2;
  data.pixels = {0, 51, 255, 128, 1, 2, 3, 4};
  data.labels = {7, 3};
  BatchLoader loader(data, 2, /*shuffle=*/false, /*seed=*/0);
  Batch batch;
  ASSERT_TRUE(loader.next(batch));
  ASSERT_EQ(batch.images.shape(), (Shape{2, 1, 2, 2}));
  const float* pixels = batch.images.data<float>();
  const float expected[] = {0.0f, 0.2f, 1.0f, 128.0f / 255.0f, 1 / 255.0f, 2 / 255.0f, 3 / 255.0f, 4 / 255.0f};
  for (int i = 0; i < 8; ++i) EXPECT_FLOAT_EQ(pixels[i], expected[i]) << "pixel " << i;
  EXPECT_EQ(batch.labels.data<int64_t>()[0], 7);
  EXPECT_EQ(batch.labels.data<int64_t>()[1], 3);
  EXPECT_FALSE(loader.next(batch));
}

// Every byte value, in images whose size is and is not a multiple of 16 (a vectorizing
// compiler's block), gives exactly the float that v / 255.0f gives.
TEST(BatchLoader, ScalesEveryByteValueExactlyAsAScalarDivision) {
  for (const auto& [rows, cols] : {std::pair<int64_t, int64_t>{16, 16}, {3, 7}}) {
    InMemoryDataset data;
    data.rows = rows;
    data.cols = cols;
    const int64_t image_size = rows * cols;
    for (int64_t i = 0; i < 2 * image_size; ++i) data.pixels.push_back(static_cast<uint8_t>((i * 37 + 11) % 256));
    data.labels = {1, 2};
    BatchLoader loader(data, 2, /*shuffle=*/false, /*seed=*/0);
    Batch batch;
    ASSERT_TRUE(loader.next(batch));
    const float* pixels = batch.images.data<float>();
    for (int64_t i = 0; i < 2 * image_size; ++i) {
      const float expected = static_cast<float>(data.pixels[static_cast<size_t>(i)]) / 255.0f;
      ASSERT_EQ(pixels[i], expected) << rows << "x" << cols << " image, pixel " << i;
    }
  }
}

TEST(BatchLoader, LabelsFollowTheirImages) {
  const InMemoryDataset data = indexed_dataset(300);
  BatchLoader loader(data, 32, /*shuffle=*/true, /*seed=*/5);
  Batch batch;
  while (loader.next(batch)) {
    const std::vector<int64_t> ids = example_ids(batch);
    for (size_t b = 0; b < ids.size(); ++b) EXPECT_EQ(batch.labels.data<int64_t>()[b], ids[b] % 10);
  }
}

TEST(BatchLoader, EveryExampleOncePerEpoch) {
  const InMemoryDataset data = indexed_dataset(300);
  BatchLoader loader(data, 32, /*shuffle=*/true, /*seed=*/11);
  for (int64_t epoch = 0; epoch < 3; ++epoch) {
    std::vector<int64_t> ids = epoch_ids(loader, epoch);
    ASSERT_EQ(ids.size(), 300u);
    std::sort(ids.begin(), ids.end());
    for (int64_t i = 0; i < 300; ++i) ASSERT_EQ(ids[static_cast<size_t>(i)], i) << "epoch " << epoch;
  }
}

TEST(BatchLoader, WithoutShuffleOrderIsSequential) {
  const InMemoryDataset data = indexed_dataset(100);
  BatchLoader loader(data, 30, /*shuffle=*/false, /*seed=*/3);
  for (int64_t epoch : {0, 4}) {
    const std::vector<int64_t> ids = epoch_ids(loader, epoch);
    ASSERT_EQ(ids.size(), 100u);
    for (int64_t i = 0; i < 100; ++i) EXPECT_EQ(ids[static_cast<size_t>(i)], i);
  }
}

TEST(BatchLoader, SameSeedSameOrderDifferentEpochDifferentOrder) {
  const InMemoryDataset data = indexed_dataset(300);
  BatchLoader first(data, 64, true, 42);
  BatchLoader second(data, 64, true, 42);
  BatchLoader other_seed(data, 64, true, 43);
  const std::vector<int64_t> epoch0 = epoch_ids(first, 0);
  EXPECT_EQ(epoch0, epoch_ids(second, 0));
  EXPECT_NE(epoch0, epoch_ids(first, 1));
  EXPECT_NE(epoch0, epoch_ids(other_seed, 0));
  std::vector<int64_t> sequential(300);
  for (int64_t i = 0; i < 300; ++i) sequential[static_cast<size_t>(i)] = i;
  EXPECT_NE(epoch0, sequential);
}

// A resumed run jumps straight to epoch e; it must see what a run that went through
// epochs 0..e-1 sees.
TEST(BatchLoader, EpochOrderIndependentOfHistory) {
  const InMemoryDataset data = indexed_dataset(300);
  BatchLoader long_run(data, 64, true, 9);
  for (int64_t epoch = 0; epoch < 3; ++epoch) epoch_ids(long_run, epoch);
  const std::vector<int64_t> after_history = epoch_ids(long_run, 3);
  BatchLoader resumed(data, 64, true, 9);
  EXPECT_EQ(epoch_ids(resumed, 3), after_history);
}

TEST(BatchLoader, SeekResumesMidEpoch) {
  const InMemoryDataset data = indexed_dataset(300);
  BatchLoader reference(data, 32, true, 21);
  reference.start_epoch(2);
  Batch batch;
  std::vector<std::vector<int64_t>> batches;
  while (reference.next(batch)) batches.push_back(example_ids(batch));
  ASSERT_EQ(batches.size(), 10u);

  BatchLoader resumed(data, 32, true, 21);
  resumed.seek(2, 4);
  EXPECT_EQ(resumed.epoch(), 2);
  EXPECT_EQ(resumed.batch_offset(), 4);
  for (size_t b = 4; b < batches.size(); ++b) {
    ASSERT_TRUE(resumed.next(batch));
    EXPECT_EQ(example_ids(batch), batches[b]) << "batch " << b;
    EXPECT_EQ(resumed.batch_offset(), static_cast<int64_t>(b) + 1);
  }
  EXPECT_FALSE(resumed.next(batch));
}

TEST(BatchLoader, SeekOutOfRange) {
  const InMemoryDataset data = indexed_dataset(100);
  BatchLoader loader(data, 30, true, 1);  // 4 batches
  EXPECT_NO_THROW(loader.seek(0, 4));     // the end of the epoch is a valid position
  EXPECT_THROW(loader.seek(0, 5), std::out_of_range);
  EXPECT_THROW(loader.seek(0, -1), std::out_of_range);
  EXPECT_THROW(loader.seek(-1, 0), std::out_of_range);
}

// Pins the shuffle itself: mt19937_64 is fully specified by the standard, so these values
// hold for every standard library; a change here would reorder every saved run.
TEST(BatchLoader, ShuffleIsPinned) {
  EXPECT_EQ(epoch_order(10, true, 42, 0), (std::vector<int64_t>{2, 0, 4, 7, 8, 3, 5, 1, 9, 6}));
  EXPECT_EQ(epoch_order(10, true, 42, 1), (std::vector<int64_t>{2, 8, 7, 3, 6, 4, 0, 9, 5, 1}));
}

TEST(BatchLoader, RejectsNonPositiveBatchSize) {
  const InMemoryDataset data = indexed_dataset(10);
  for (int64_t bad : {0, -3}) {
    try {
      BatchLoader loader(data, bad, true, 1);
      ADD_FAILURE() << "batch size " << bad << " was accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_EQ(std::string(e.what()), "batch size must be positive, got " + std::to_string(bad));
    }
  }
}

TEST(BatchLoader, EmptyDatasetHasNoBatches) {
  const InMemoryDataset data;
  BatchLoader loader(data, 8, true, 1);
  EXPECT_EQ(loader.num_batches(), 0);
  Batch batch;
  EXPECT_FALSE(loader.next(batch));
}
