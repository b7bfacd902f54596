// The checkpoint file format and directory: what is written reads back exactly, and a
// truncated, bit-flipped, foreign or future-version file is refused with a message that
// names it, while earlier checkpoints stay usable.
#include "dpt/checkpoint/checkpoint.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <optional>
#include <thread>
#include <unistd.h>

#include "dpt/checkpoint/checkpoint_dir.h"
#include "dpt/checkpoint/checkpoint_summary.h"
#include "dpt/checkpoint/group_checkpoints.h"
#include "dpt/parallel/communicator.h"
#include "test_support.h"

using namespace dpt;
using checkpoint::Checkpoint;
using checkpoint::CheckpointError;
using dpt::testing_support::error_of;
using testing::HasSubstr;

namespace {

Checkpoint sample(int64_t global_step = 7) {
  Checkpoint c;
  c.model = "lenet (scratch API)";
  c.seed = 3;
  c.batch_size = 64;
  c.train_examples = 512;
  c.devices = {"cpu:0", "cpu:1"};
  c.position = {1, 3, global_step};
  c.epoch_sum = {123.5, 40, 192};
  c.epoch_seconds = 1.25;
  dpt::checkpoint::EpochStats e;
  e.epoch = 1;
  e.train_loss = 2.1;
  e.train_acc = 0.3;
  e.test_acc = 0.4;
  e.seconds = 2.5;
  e.examples_per_sec = 204.8;
  e.eval_seconds = 0.75;
  c.history = {e};
  c.params = {{"W1", {2, 3}, {1, -2, 3.5f, 0, 1e-30f, -0.0f}}, {"b1", {2}, {0.25f, 7}}};
  c.buffers = {{"bn.running_mean", {2}, {0.5f, 0.75f}}};
  c.optimizer = "adamw";
  c.optimizer_steps = 7;
  c.optimizer_state = {{"exp_avg/W1", {2, 3}, {6, 5, 4, 3, 2, 1}}, {"exp_avg_sq/W1", {2, 3}, {1, 2, 3, 4, 5, 6}}};
  return c;
}

std::vector<uint8_t> read_all(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_all(const std::filesystem::path& file, const std::vector<uint8_t>& bytes) {
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

std::filesystem::path fresh_dir(const std::string& name) {
  return dpt::testing_support::unique_temp_dir("dpt_checkpoint_test_" + name);
}

}  // namespace

TEST(CheckpointFormat, RoundTripsEveryField) {
  const Checkpoint c = sample();
  const Checkpoint back = checkpoint::decode(checkpoint::encode(c), "mem");
  EXPECT_EQ(back.model, c.model);
  EXPECT_EQ(back.seed, 3u);
  EXPECT_EQ(back.batch_size, 64);
  EXPECT_EQ(back.train_examples, 512);
  EXPECT_EQ(back.devices, c.devices);
  EXPECT_EQ(back.position.epoch, 1);
  EXPECT_EQ(back.position.batch_offset, 3);
  EXPECT_EQ(back.position.global_step, 7);
  EXPECT_EQ(back.epoch_sum.loss_sum, 123.5);
  EXPECT_EQ(back.epoch_sum.correct, 40);
  EXPECT_EQ(back.epoch_sum.examples, 192);
  EXPECT_EQ(back.epoch_seconds, 1.25);
  ASSERT_EQ(back.history.size(), 1u);
  EXPECT_EQ(back.history[0].test_acc, 0.4);
  EXPECT_EQ(back.history[0].eval_seconds, 0.75);
  ASSERT_EQ(back.params.size(), 2u);
  EXPECT_EQ(back.params[0].name, "W1");
  EXPECT_EQ(back.params[0].shape, (Shape{2, 3}));
  // Bit for bit, signed zero and denormal-range values included.
  EXPECT_EQ(std::memcmp(back.params[0].values.data(), c.params[0].values.data(), 6 * sizeof(float)), 0);
  EXPECT_EQ(back.buffers[0].name, "bn.running_mean");
  ASSERT_EQ(back.optimizer_state.size(), 2u);
  EXPECT_EQ(back.optimizer, "adamw");
  EXPECT_EQ(back.optimizer_steps, 7);
  EXPECT_EQ(back.optimizer_state[0].name, "exp_avg/W1");
  EXPECT_EQ(back.optimizer_state[1].name, "exp_avg_sq/W1");
  EXPECT_EQ(back.optimizer_state[0].values, c.optimizer_state[0].values);
  EXPECT_EQ(back.optimizer_state[1].values, c.optimizer_state[1].values);
  EXPECT_EQ(checkpoint::digest(back.params), checkpoint::digest(c.params));
}

TEST(CheckpointFormat, KeepsTheNanOfAnEpochWhoseStepsWereAllSkipped) {
  Checkpoint c = sample();
  c.history[0].train_loss = std::nan("");  // 0 / 0: --on-nan skip dropped every step
  c.epoch_sum.loss_sum = std::numeric_limits<double>::infinity();
  const Checkpoint back = checkpoint::decode(checkpoint::encode(c), "mem");
  EXPECT_TRUE(std::isnan(back.history[0].train_loss));
  EXPECT_TRUE(std::isnan(back.epoch_sum.loss_sum)) << "JSON keeps no infinity: it reads back as NaN";
  EXPECT_EQ(back.history[0].test_acc, 0.4);
}

// Checkpoints written before evaluation was timed have no "eval_seconds" in their epochs:
// they still load (it reads as 0). Made here by cutting the field out of a new file's JSON
// and repairing the three lengths and the CRC the format keeps.
TEST(CheckpointFormat, LoadsAnEpochHistoryWithoutEvalSeconds) {
  std::vector<uint8_t> bytes = checkpoint::encode(sample());
  const std::string field = ",\"eval_seconds\":0.75";
  const auto at = std::search(bytes.begin(), bytes.end(), field.begin(), field.end());
  ASSERT_NE(at, bytes.end());
  bytes.erase(at, at + static_cast<std::ptrdiff_t>(field.size()));
  const auto put_le = [&](size_t offset, uint64_t value, int width) {
    for (int i = 0; i < width; ++i) bytes[offset + static_cast<size_t>(i)] = static_cast<uint8_t>(value >> (8 * i));
  };
  const auto get_le = [&](size_t offset) {
    uint64_t value = 0;
    for (int i = 7; i >= 0; --i) value = value << 8 | bytes[offset + static_cast<size_t>(i)];
    return value;
  };
  put_le(12, get_le(12) - field.size(), 8);  // body bytes
  put_le(20, get_le(20) - field.size(), 8);  // JSON bytes, the body's first field
  const size_t crc_at = bytes.size() - 4;
  put_le(crc_at, crc32(crc32(0L, Z_NULL, 0), bytes.data(), static_cast<uInt>(crc_at)), 4);
  const Checkpoint back = checkpoint::decode(bytes, "old.ckpt");
  ASSERT_EQ(back.history.size(), 1u);
  EXPECT_EQ(back.history[0].eval_seconds, 0.0);
  EXPECT_EQ(back.history[0].examples_per_sec, 204.8);
}

TEST(CheckpointFormat, StartsWithTheDocumentedHeader) {
  const std::vector<uint8_t> bytes = checkpoint::encode(sample());
  ASSERT_GT(bytes.size(), 20u);
  EXPECT_EQ(std::string(bytes.begin(), bytes.begin() + 8), "DPTCKPT\n");
  EXPECT_EQ(bytes[8], checkpoint::kFormatVersion);  // u32 little-endian
  uint64_t body = 0;
  for (int i = 0; i < 8; ++i) body |= uint64_t{bytes[12 + i]} << (8 * i);
  EXPECT_EQ(body, bytes.size() - 20 - 4) << "header, body, then a 4-byte CRC";
}

TEST(CheckpointFormat, RefusesEveryTruncation) {
  const std::vector<uint8_t> bytes = checkpoint::encode(sample());
  // Every length from 0 to one byte short: exhaustive (a few thousand decodes, milliseconds).
  for (size_t keep = 0; keep < bytes.size(); ++keep) {
    const std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(keep));
    const std::string error = error_of<CheckpointError>([&] { checkpoint::decode(cut, "f.ckpt"); });
    EXPECT_THAT(error, HasSubstr("checkpoint f.ckpt")) << "kept " << keep << " bytes";
    if (keep >= 20) {
      EXPECT_THAT(error, HasSubstr("truncated")) << "kept " << keep << " bytes";
    }
  }
}

TEST(CheckpointFormat, RefusesEveryFlippedBit) {
  const std::vector<uint8_t> bytes = checkpoint::encode(sample());
  // Every bit of the file, exhaustively: the magic, the version, the length or the CRC
  // check catches each one.
  for (size_t byte = 0; byte < bytes.size(); ++byte) {
    for (int bit = 0; bit < 8; ++bit) {
      std::vector<uint8_t> flipped = bytes;
      flipped[byte] ^= static_cast<uint8_t>(1u << bit);
      EXPECT_THROW(checkpoint::decode(flipped, "f.ckpt"), CheckpointError) << "byte " << byte << " bit " << bit;
    }
  }
  std::vector<uint8_t> flipped = bytes;
  flipped[bytes.size() / 2] ^= 0x10;
  EXPECT_EQ(error_of<CheckpointError>([&] { checkpoint::decode(flipped, "f.ckpt"); }),
            "checkpoint f.ckpt is damaged: its CRC-32 checksum does not match its contents; use an earlier "
            "checkpoint");
}

TEST(CheckpointFormat, NamesForeignFilesAndOtherVersions) {
  const std::vector<uint8_t> text{'h', 'e', 'l', 'l', 'o', ' ', 'w', 'o', 'r', 'l', 'd', '!'};
  EXPECT_EQ(error_of<CheckpointError>([&] { checkpoint::decode(text, "x.ckpt"); }),
            "checkpoint x.ckpt is not a dptrain checkpoint (no DPTCKPT header)");
  std::vector<uint8_t> future = checkpoint::encode(sample());
  future[8] = 2;
  EXPECT_EQ(error_of<CheckpointError>([&] { checkpoint::decode(future, "x.ckpt"); }),
            "checkpoint x.ckpt has format version 2, this dptrain reads version 1; resume it with the dptrain "
            "that wrote it");
  std::vector<uint8_t> longer = checkpoint::encode(sample());
  longer.push_back(0);
  EXPECT_THAT(error_of<CheckpointError>([&] { checkpoint::decode(longer, "x.ckpt"); }),
              HasSubstr("1 unexpected bytes after its data"));
}

TEST(CheckpointFormat, CopyIntoChecksNamesAndShapes) {
  const Checkpoint c = sample();
  Tensor w = Tensor::zeros({2, 3});
  Tensor b = Tensor::zeros({2});
  checkpoint::copy_into(c.params, {{"W1", w}, {"b1", b}}, "parameters", "f.ckpt");
  EXPECT_EQ(b.to_vector(), (std::vector<float>{0.25f, 7}));
  EXPECT_EQ(error_of<CheckpointError>([&] {
              checkpoint::copy_into(c.params, {{"W1", w}}, "parameters", "f.ckpt");
            }),
            "checkpoint f.ckpt holds 2 parameters but the model has 1; it was written for another model (check "
            "`model` and `api`)");
  Tensor wide = Tensor::zeros({2, 4});
  EXPECT_EQ(error_of<CheckpointError>([&] {
              checkpoint::copy_into(c.params, {{"W1", wide}, {"b1", b}}, "parameters", "f.ckpt");
            }),
            "checkpoint f.ckpt: parameters 0 is W1 [2, 3] but the model's is W1 [2, 4]; it was written for another "
            "model");
}

TEST(CheckpointDir, SavesAtomicallyAndKeepsTheNewest) {
  const auto dir = fresh_dir("keep");
  for (int64_t step : {3, 6, 9}) checkpoint::save(dir, sample(step), /*keep=*/2);
  const auto files = checkpoint::list(dir);
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(files[0].filename(), "step-000000006.ckpt");
  EXPECT_EQ(files[1].filename(), "step-000000009.ckpt");
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    EXPECT_EQ(entry.path().extension(), ".ckpt") << "no temporary file is left behind: " << entry.path();
  }
  EXPECT_EQ(checkpoint::load(files[1]).position.global_step, 9);
  // Other files in the directory are neither listed nor deleted.
  write_all(dir / "notes.txt", {1, 2});
  write_all(dir / "step-12.ckpt", {1, 2});
  write_all(dir / "step-00000001x.ckpt", {1, 2});
  checkpoint::save(dir, sample(12), /*keep=*/2);
  EXPECT_EQ(checkpoint::list(dir).size(), 2u);
  EXPECT_TRUE(std::filesystem::exists(dir / "notes.txt"));
  EXPECT_TRUE(std::filesystem::exists(dir / "step-12.ckpt"));
}

// A folder shared by two runs: each run prunes only its own files, a step both runs reach
// keeps both files, and resuming needs the run named.
TEST(CheckpointDir, PrunesAndResumesOnlyItsOwnRun) {
  const auto dir = fresh_dir("two_runs");
  const auto of_run = [](int64_t step, const std::string& run) {
    Checkpoint c = sample(step);
    c.run_id = run;
    return c;
  };
  checkpoint::save(dir, of_run(9998, "aaaaaaaaaaaaaaaa"), 2);
  checkpoint::save(dir, of_run(9999, "aaaaaaaaaaaaaaaa"), 2);
  checkpoint::save(dir, of_run(8, "bbbbbbbbbbbbbbbb"), 2);
  checkpoint::save(dir, of_run(16, "bbbbbbbbbbbbbbbb"), 2);
  checkpoint::save(dir, of_run(9999, "bbbbbbbbbbbbbbbb"), 2);
  std::vector<std::string> names;
  for (const auto& f : checkpoint::list(dir)) names.push_back(f.filename().string());
  EXPECT_EQ(names, (std::vector<std::string>{"step-000000016.ckpt", "step-000009998.ckpt",
                                              "step-000009999-bbbbbbbbbbbbbbbb.ckpt", "step-000009999.ckpt"}));
  EXPECT_EQ(checkpoint::load(dir / "step-000009999.ckpt").run_id, "aaaaaaaaaaaaaaaa") << "not replaced";
  EXPECT_THAT(error_of<CheckpointError>([&] { checkpoint::load_latest(dir); }),
              HasSubstr("holds the checkpoints of 2 runs; pass `resume_run` with the id of the one to continue:\n"
                        "  run aaaaaaaaaaaaaaaa: newest step-000009999.ckpt, 2 files\n"
                        "  run bbbbbbbbbbbbbbbb: newest step-000009999-bbbbbbbbbbbbbbbb.ckpt, 2 files"));
  EXPECT_EQ(checkpoint::load_latest(dir, "bbbbbbbbbbbbbbbb").file.filename(), "step-000009999-bbbbbbbbbbbbbbbb.ckpt");
  EXPECT_EQ(checkpoint::read_metadata(dir / "step-000000016.ckpt").run_id, "bbbbbbbbbbbbbbbb");
}

// The recorded input shape is bounded side by side: a product of sides that overflows int64
// must not wrap into a plausible size.
TEST(Checkpoint, RefusesARecordedShapeWhoseProductOverflows) {
  Checkpoint c = sample();
  c.data.shape = {int64_t{1} << 27, int64_t{1} << 27, int64_t{1} << 27};
  const std::vector<uint8_t> bytes = checkpoint::encode(c);
  EXPECT_THAT(error_of<CheckpointError>([&] { checkpoint::decode(bytes, "f.ckpt"); }),
              HasSubstr("its recorded data shape 134217728x134217728x134217728 or class count 10 is impossible"));
}

TEST(CheckpointDir, SkipsADamagedNewestFileAndKeepsThePrevious) {
  const auto dir = fresh_dir("damaged");
  checkpoint::save(dir, sample(3));
  const auto newest = checkpoint::save(dir, sample(6));
  std::vector<uint8_t> bytes = read_all(newest);
  bytes[bytes.size() / 3] ^= 0x01;  // one flipped bit on disk
  write_all(newest, bytes);

  EXPECT_THAT(error_of<CheckpointError>([&] { checkpoint::load(newest); }), HasSubstr("CRC-32 checksum"));
  const checkpoint::Loaded loaded = checkpoint::load_latest(dir);
  EXPECT_EQ(loaded.file.filename(), "step-000000003.ckpt");
  EXPECT_EQ(loaded.checkpoint.position.global_step, 3);
  ASSERT_EQ(loaded.refused.size(), 1u);
  EXPECT_THAT(loaded.refused[0], HasSubstr("step-000000006.ckpt is damaged"));
  EXPECT_TRUE(std::filesystem::exists(newest)) << "the damaged file is left for the user to inspect";

  // Truncate the older one too: nothing usable is left, and the error lists both causes.
  const auto older = dir / "step-000000003.ckpt";
  std::filesystem::resize_file(older, std::filesystem::file_size(older) - 10);
  const std::string error = error_of<CheckpointError>([&] { checkpoint::load_latest(dir); });
  EXPECT_THAT(error, HasSubstr("no usable checkpoint in " + dir.string()));
  EXPECT_THAT(error, HasSubstr("step-000000006.ckpt is damaged: its CRC-32"));
  EXPECT_THAT(error, HasSubstr("step-000000003.ckpt is damaged: it is truncated"));
}

TEST(CheckpointDir, ExplainsAnEmptyOrMissingDirectory) {
  EXPECT_EQ(error_of<CheckpointError>([&] { checkpoint::load_latest(fresh_dir("none")); }),
            "no usable checkpoint in " + fresh_dir("none").string() +
                " (no step-*.ckpt files; train with `checkpoint_dir` first)");
  EXPECT_THAT(error_of<std::runtime_error>([] { checkpoint::save("/proc/no/such/dir", sample()); }),
              HasSubstr("cannot create checkpoint directory /proc/no/such/dir"));
}

// Checkpoints kept on every host (checkpoint/group_checkpoints.h), three ranks as threads
// of an in-process job, each with its own directory: rank 0 holds steps 4 and 8, rank 1
// none, rank 2 step 4 and a damaged step 12. Every rank must get step 8, sent by rank 0;
// the ranks that write checkpoints (0 and 1 here) keep a copy, rank 2 does not.
TEST(GroupCheckpoints, EveryRankGetsTheNewestAnyRankHoldsAndWritersKeepACopy) {
  constexpr int n = 3;
  const std::vector<std::filesystem::path> dirs{fresh_dir("group0"), fresh_dir("group1"), fresh_dir("group2")};
  checkpoint::save(dirs[0], sample(4));
  checkpoint::save(dirs[0], sample(8));
  checkpoint::save(dirs[2], sample(4));
  const auto damaged = checkpoint::save(dirs[2], sample(12));
  std::vector<uint8_t> bytes = read_all(damaged);
  bytes[bytes.size() / 2] ^= 0x01;
  write_all(damaged, bytes);
  const std::vector<uint8_t> expected = read_all(dirs[0] / "step-000000008.ckpt");

  std::shared_ptr<parallel::Communicator> comm = parallel::make_in_process_communicator("ring", n);
  const auto on_every_rank = [&](bool none_is_ok, const std::vector<std::filesystem::path>& in) {
    std::vector<std::optional<checkpoint::Loaded>> found(n);
    std::vector<std::string> errors(n);
    std::vector<std::thread> threads;
    for (int rank = 0; rank < n; ++rank) {
      threads.emplace_back([&, rank] {
        try {
          found[rank] = checkpoint::load_latest_in_group(parallel::ProcessGroup{comm, rank}, in[rank],
                                                         /*keeps_copies=*/rank != 2, none_is_ok);
        } catch (const CheckpointError& e) {
          errors[rank] = e.what();
        }
      });
    }
    for (std::thread& t : threads) t.join();
    return std::make_pair(found, errors);
  };
  const auto [found, errors] = on_every_rank(false, dirs);
  for (int rank = 0; rank < n; ++rank) {
    ASSERT_TRUE(found[rank].has_value()) << "rank " << rank << ": " << errors[rank];
    EXPECT_EQ(found[rank]->checkpoint.position.global_step, 8) << "rank " << rank;
    EXPECT_EQ(checkpoint::encode(found[rank]->checkpoint), checkpoint::encode(sample(8))) << "rank " << rank;
  }
  EXPECT_EQ(read_all(dirs[1] / "step-000000008.ckpt"), expected) << "a writer keeps a copy, byte for byte";
  EXPECT_FALSE(std::filesystem::exists(dirs[2] / "step-000000008.ckpt")) << "a rank that does not write keeps none";
  EXPECT_EQ(found[2]->refused.size(), 1u) << "rank 2's damaged step 12 is reported";

  // No rank holds one: an error on every rank, or nothing anywhere when that is allowed.
  const std::vector<std::filesystem::path> empty{fresh_dir("none0"), fresh_dir("none1"), fresh_dir("none2")};
  const auto [nothing, refused] = on_every_rank(false, empty);
  for (int rank = 0; rank < n; ++rank) {
    EXPECT_FALSE(nothing[rank].has_value());
    EXPECT_THAT(refused[rank], HasSubstr("no rank of the job holds a usable checkpoint; rank " + std::to_string(rank) +
                                         ": no usable checkpoint in " + empty[rank].string()));
  }
  const auto [allowed, quiet] = on_every_rank(true, empty);
  for (int rank = 0; rank < n; ++rank) EXPECT_TRUE(!allowed[rank].has_value() && quiet[rank].empty()) << "rank " << rank;
}

// The lowest rank on each host writes a per-host directory; rank 0 alone a shared one.
TEST(GroupCheckpoints, TheFirstRankOfEachHostWritesAPerHostDirectory) {
  std::shared_ptr<parallel::Communicator> comm = parallel::make_in_process_communicator("ring", 2);
  std::vector<int> per_host(2), shared(2);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < 2; ++rank) {
    threads.emplace_back([&, rank] {
      const parallel::ProcessGroup group{comm, rank};
      per_host[rank] = checkpoint::writes_checkpoints(group, "/tmp/ckpt-{host}");  // one host: rank 0
      shared[rank] = checkpoint::writes_checkpoints(group, "/tmp/ckpt");
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(per_host, (std::vector<int>{1, 0})) << "both ranks run on this one host";
  EXPECT_EQ(shared, (std::vector<int>{1, 0}));
  char name[256] = {};
  gethostname(name, sizeof name - 1);
  EXPECT_EQ(checkpoint::expand_host("/d/{host}/c-{host}"), std::filesystem::path("/d/") / name / ("c-" + std::string(name)));
  EXPECT_TRUE(checkpoint::per_host("x{host}"));
  EXPECT_FALSE(checkpoint::per_host("x{hos}"));
}
