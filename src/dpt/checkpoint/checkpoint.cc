#include "dpt/checkpoint/checkpoint.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <fstream>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>

namespace dpt::checkpoint {
namespace {

constexpr char kMagic[8] = {'D', 'P', 'T', 'C', 'K', 'P', 'T', '\n'};
constexpr size_t kHeaderBytes = sizeof(kMagic) + 4 + 8;
constexpr size_t kFooterBytes = 4;
// No real model has tensors of more dimensions; the cap bounds what a damaged file can ask for.
constexpr uint32_t kMaxDims = 8;

uint32_t crc32_of(std::span<const uint8_t> bytes) {
  uLong crc = crc32(0L, Z_NULL, 0);
  // zlib takes uInt lengths: feed large buffers in pieces.
  size_t done = 0;
  while (done < bytes.size()) {
    const size_t piece = std::min<size_t>(bytes.size() - done, std::numeric_limits<uInt>::max());
    crc = crc32(crc, bytes.data() + done, static_cast<uInt>(piece));
    done += piece;
  }
  return static_cast<uint32_t>(crc);
}

// Little-endian writer: the same bytes on every machine.
class Writer {
 public:
  template <class T>
  void put(T value) {
    static_assert(std::is_trivially_copyable_v<T>);
    uint8_t raw[sizeof(T)];
    std::memcpy(raw, &value, sizeof(T));
    if constexpr (std::endian::native == std::endian::big) std::reverse(raw, raw + sizeof(T));
    bytes_.insert(bytes_.end(), raw, raw + sizeof(T));
  }
  void put_bytes(const void* data, size_t n) {
    const auto* p = static_cast<const uint8_t*>(data);
    bytes_.insert(bytes_.end(), p, p + n);
  }
  void put_floats(const std::vector<float>& values) {
    if constexpr (std::endian::native == std::endian::little) {
      put_bytes(values.data(), values.size() * sizeof(float));
    } else {
      for (float v : values) put(v);
    }
  }
  std::vector<uint8_t>& bytes() { return bytes_; }

 private:
  std::vector<uint8_t> bytes_;
};

// Bounds-checked little-endian reader: every read past the end is a CheckpointError.
class Reader {
 public:
  Reader(std::span<const uint8_t> bytes, const std::string& source) : bytes_(bytes), source_(source) {}

  template <class T>
  T get(const char* what) {
    need(sizeof(T), what);
    uint8_t raw[sizeof(T)];
    std::memcpy(raw, bytes_.data() + pos_, sizeof(T));
    if constexpr (std::endian::native == std::endian::big) std::reverse(raw, raw + sizeof(T));
    pos_ += sizeof(T);
    T value;
    std::memcpy(&value, raw, sizeof(T));
    return value;
  }
  std::string get_string(size_t n, const char* what) {
    need(n, what);
    std::string s(reinterpret_cast<const char*>(bytes_.data() + pos_), n);
    pos_ += n;
    return s;
  }
  std::vector<float> get_floats(size_t n, const char* what) {
    if (n > remaining() / sizeof(float)) need(n * sizeof(float), what);
    std::vector<float> values(n);
    for (size_t i = 0; i < n; ++i) values[i] = get<float>(what);
    return values;
  }
  size_t remaining() const { return bytes_.size() - pos_; }

 private:
  void need(size_t n, const char* what) {
    if (n > remaining()) {
      throw CheckpointError("checkpoint " + source_ + " is damaged: it ends inside " + what +
                            "; use an earlier checkpoint");
    }
  }
  std::span<const uint8_t> bytes_;
  size_t pos_ = 0;
  const std::string& source_;
};

[[noreturn]] void damaged(const std::string& source, const std::string& cause) {
  throw CheckpointError("checkpoint " + source + " is damaged: " + cause + "; use an earlier checkpoint");
}

void put_tensor(Writer& w, const std::string& name, const NamedTensor& t) {
  w.put(static_cast<uint32_t>(name.size()));
  w.put_bytes(name.data(), name.size());
  w.put(static_cast<uint32_t>(t.shape.size()));
  for (int64_t d : t.shape) w.put(d);
  w.put_floats(t.values);
}

NamedTensor get_tensor(Reader& r, const std::string& source, std::string& group) {
  const uint32_t name_bytes = r.get<uint32_t>("a tensor name's length");
  std::string full_name = r.get_string(name_bytes, "a tensor name");
  const size_t slash = full_name.find('/');
  if (slash == std::string::npos) damaged(source, "tensor name '" + full_name + "' has no group");
  group = full_name.substr(0, slash);
  NamedTensor t;
  t.name = full_name.substr(slash + 1);
  const uint32_t ndim = r.get<uint32_t>("a tensor's rank");
  if (ndim > kMaxDims) damaged(source, "tensor " + t.name + " claims " + std::to_string(ndim) + " dimensions");
  uint64_t numel = 1;
  for (uint32_t i = 0; i < ndim; ++i) {
    const int64_t d = r.get<int64_t>("a tensor's shape");
    // Values must fit in what is left of the file: this rejects absurd shapes before allocating.
    if (d < 0 || (d > 0 && numel > r.remaining() / sizeof(float) / static_cast<uint64_t>(d))) {
      damaged(source, "tensor " + t.name + " has impossible shape dimension " + std::to_string(d));
    }
    numel *= static_cast<uint64_t>(d);
    t.shape.push_back(d);
  }
  t.values = r.get_floats(numel, "a tensor's values");
  return t;
}

nlohmann::json history_json(const std::vector<EpochStats>& history) {
  nlohmann::json list = nlohmann::json::array();
  for (const EpochStats& s : history) {
    list.push_back({{"epoch", s.epoch},
                    {"train_loss", s.train_loss},
                    {"train_acc", s.train_acc},
                    {"test_acc", s.test_acc},
                    {"seconds", s.seconds},
                    {"examples_per_sec", s.examples_per_sec},
                    {"eval_seconds", s.eval_seconds}});
  }
  return list;
}

// An integer field: a number with a fraction or past the type's range is refused (nlohmann's
// get<int64_t>() would convert it, undefined past the range).
template <class Int>
Int integer(const nlohmann::json& value) {
  if (!value.is_number_integer()) throw std::invalid_argument("'" + value.dump() + "' is not an integer");
  if (value.is_number_unsigned()) {
    const uint64_t v = value.get<uint64_t>();
    if (v > static_cast<uint64_t>(std::numeric_limits<Int>::max())) throw std::invalid_argument(value.dump() + " is too large");
    return static_cast<Int>(v);
  }
  const int64_t v = value.get<int64_t>();
  if (v < static_cast<int64_t>(std::numeric_limits<Int>::min()) ||
      (v > 0 && static_cast<uint64_t>(v) > static_cast<uint64_t>(std::numeric_limits<Int>::max()))) {
    throw std::invalid_argument(value.dump() + " is out of range");
  }
  return static_cast<Int>(v);
}

// Floats that must be finite (normalization): 1e300 would read as inf and be written back as null.
std::vector<float> finite_floats(const nlohmann::json& list) {
  std::vector<float> out;
  for (const nlohmann::json& v : list) {
    if (!v.is_number() || !std::isfinite(v.get<double>()) || !std::isfinite(static_cast<float>(v.get<double>()))) {
      throw std::invalid_argument("'" + v.dump() + "' is not a finite float");
    }
    out.push_back(static_cast<float>(v.get<double>()));
  }
  return out;
}

// JSON has no NaN or infinity: nlohmann writes them as null (an epoch whose every step
// was skipped has a NaN mean loss), so null reads back as NaN.
double number(const nlohmann::json& value) {
  return value.is_null() ? std::numeric_limits<double>::quiet_NaN() : value.get<double>();
}

std::vector<EpochStats> history_from(const nlohmann::json& list) {
  std::vector<EpochStats> history;
  for (const nlohmann::json& e : list) {
    EpochStats s;
    s.epoch = integer<int>(e.at("epoch"));
    s.train_loss = number(e.at("train_loss"));
    s.train_acc = number(e.at("train_acc"));
    s.test_acc = number(e.at("test_acc"));
    s.seconds = number(e.at("seconds"));
    s.examples_per_sec = number(e.at("examples_per_sec"));
    // Absent from checkpoints written before evaluation was timed: those read as 0.
    if (e.contains("eval_seconds")) s.eval_seconds = number(e.at("eval_seconds"));
    history.push_back(s);
  }
  return history;
}

nlohmann::json data_json(const data::DataInfo& d) {
  return {{"shape", {d.shape.channels, d.shape.height, d.shape.width}},
          {"classes", d.classes},
          {"light_on_dark", d.light_on_dark},
          {"mean", d.mean},
          {"std", d.stddev}};
}

data::DataInfo data_from(const nlohmann::json& j) {
  data::DataInfo d;
  std::vector<int64_t> shape;
  for (const nlohmann::json& d : j.at("shape")) shape.push_back(integer<int64_t>(d));
  if (shape.size() != 3) throw std::invalid_argument("the recorded input shape is not channels, height, width");
  d.shape = {shape[0], shape[1], shape[2]};
  d.classes = j.at("classes").get<std::vector<std::string>>();
  d.light_on_dark = j.at("light_on_dark").get<bool>();
  d.mean = finite_floats(j.at("mean"));
  d.stddev = finite_floats(j.at("std"));
  return d;
}

std::string metadata_json(const Checkpoint& c) {
  nlohmann::json settings = nlohmann::json::object();
  for (const auto& [name, value] : c.settings) settings[name] = value;
  const nlohmann::json meta = {
      {"run_id", c.run_id},
      {"settings", settings},
      {"model", c.model},
      {"seed", c.seed},
      {"batch_size", c.batch_size},
      {"deterministic_chunk", c.deterministic_chunk},
      {"lr_schedule", c.lr_schedule},
      {"warmup_epochs", c.warmup_epochs},
      {"lr_scaling", c.lr_scaling},
      {"accumulate", c.accumulate},
      {"optimizer", c.optimizer},
      {"optimizer_steps", c.optimizer_steps},
      {"train_examples", c.train_examples},
      {"data", data_json(c.data)},
      {"devices", c.devices},
      {"epoch", c.position.epoch},
      {"batch_offset", c.position.batch_offset},
      {"global_step", c.position.global_step},
      {"epoch_loss_sum", c.epoch_sum.loss_sum},
      {"epoch_correct", c.epoch_sum.correct},
      {"epoch_examples", c.epoch_sum.examples},
      {"epoch_seconds", c.epoch_seconds},
      {"history", history_json(c.history)},
  };
  // Names are checked for UTF-8 when the data opens; should one slip through, its bytes are
  // replaced (U+FFFD) rather than losing the checkpoint to an exception.
  return meta.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

void parse_metadata(const std::string& text, Checkpoint& c, const std::string& source) {
  try {
    const nlohmann::json meta = nlohmann::json::parse(text);
    c.run_id = meta.value("run_id", std::string());  // absent in files before runs were told apart
    if (meta.contains("settings")) {
      for (const auto& [name, value] : meta.at("settings").items()) c.settings.emplace_back(name, value.get<std::string>());
    }
    c.model = meta.at("model").get<std::string>();
    c.seed = integer<uint64_t>(meta.at("seed"));
    c.batch_size = integer<int64_t>(meta.at("batch_size"));
    // Absent in files before the mode.
    c.deterministic_chunk = meta.contains("deterministic_chunk") ? integer<int64_t>(meta.at("deterministic_chunk")) : 0;
    // Absent in files before schedules and accumulation: the constant lr, one batch per update.
    c.lr_schedule = meta.value("lr_schedule", std::string("constant"));
    c.warmup_epochs = meta.contains("warmup_epochs") ? integer<int64_t>(meta.at("warmup_epochs")) : 0;
    c.lr_scaling = meta.value("lr_scaling", std::string("none"));
    c.accumulate = meta.contains("accumulate") ? integer<int64_t>(meta.at("accumulate")) : 1;
    c.optimizer = meta.value("optimizer", std::string("sgd"));
    c.optimizer_steps = meta.contains("optimizer_steps") ? integer<int64_t>(meta.at("optimizer_steps")) : 0;
    c.train_examples = integer<int64_t>(meta.at("train_examples"));
    c.data = meta.contains("data") ? data_from(meta.at("data")) : data::fashion_mnist_info();
    c.devices = meta.at("devices").get<std::vector<std::string>>();
    c.position.epoch = integer<int64_t>(meta.at("epoch"));
    c.position.batch_offset = integer<int64_t>(meta.at("batch_offset"));
    c.position.global_step = integer<int64_t>(meta.at("global_step"));
    c.epoch_sum.loss_sum = number(meta.at("epoch_loss_sum"));
    c.epoch_sum.correct = integer<int64_t>(meta.at("epoch_correct"));
    c.epoch_sum.examples = integer<int64_t>(meta.at("epoch_examples"));
    c.epoch_seconds = number(meta.at("epoch_seconds"));
    c.history = history_from(meta.at("history"));
  } catch (const nlohmann::json::exception& e) {
    damaged(source, std::string("its metadata is unreadable (") + e.what() + ")");
  } catch (const std::invalid_argument& e) {
    damaged(source, std::string("its metadata is unreadable (") + e.what() + ")");
  }
  const ImageShape& in = c.data.shape;
  // Each side is bounded before the product, which could otherwise overflow.
  constexpr int64_t kMaxSide = int64_t{1} << 28;
  const bool sides_ok = in.channels >= 1 && in.height >= 1 && in.width >= 1 && in.channels <= kMaxSide &&
                        in.height <= kMaxSide && in.width <= kMaxSide;
  if (!sides_ok || in.channels * in.height > kMaxSide / in.width || c.data.classes.empty()) {
    damaged(source, "its recorded data shape " + in.str() + " or class count " + std::to_string(c.data.classes.size()) +
                        " is impossible");
  }
  if (c.position.epoch < 0 || c.position.batch_offset < 0 || c.position.global_step < 0 || c.batch_size < 1) {
    damaged(source, "its position or batch size is negative");
  }
}

// The header (kHeaderBytes at the start of `bytes`): the magic, a version this dptrain
// reads, and the body's length, which it returns.
uint64_t body_length(std::span<const uint8_t> bytes, const std::string& source) {
  if (bytes.size() < sizeof(kMagic) || std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) != 0) {
    throw CheckpointError("checkpoint " + source + " is not a dptrain checkpoint (no DPTCKPT header)");
  }
  if (bytes.size() < kHeaderBytes) damaged(source, "it is truncated to " + std::to_string(bytes.size()) + " bytes");
  Reader header(bytes.subspan(sizeof(kMagic), kHeaderBytes - sizeof(kMagic)), source);
  const uint32_t version = header.get<uint32_t>("the header");
  if (version != kFormatVersion) {
    throw CheckpointError("checkpoint " + source + " has format version " + std::to_string(version) +
                          ", this dptrain reads version " + std::to_string(kFormatVersion) +
                          "; resume it with the dptrain that wrote it");
  }
  return header.get<uint64_t>("the header");
}

// The metadata's length, checked against `file_bytes`; `head`: the file's first
// kHeaderBytes + 8 bytes (the metadata starts after them).
uint64_t metadata_length(std::span<const uint8_t> head, uint64_t file_bytes, const std::string& source) {
  const uint64_t body_bytes = body_length(head, source);
  Reader r(head.subspan(kHeaderBytes), source);
  const uint64_t meta_bytes = r.get<uint64_t>("the metadata length");
  if (body_bytes > file_bytes || meta_bytes > body_bytes - std::min<uint64_t>(body_bytes, 8)) {
    damaged(source, "its metadata length exceeds the file");
  }
  return meta_bytes;
}

}  // namespace

Checkpoint read_metadata(const std::filesystem::path& file) {
  const std::string source = file.string();
  std::ifstream in(file, std::ios::binary | std::ios::ate);
  if (!in) throw CheckpointError("cannot open checkpoint " + source + ": " + std::strerror(errno));
  const auto size = static_cast<uint64_t>(std::max<std::streamoff>(in.tellg(), 0));
  std::vector<uint8_t> head(kHeaderBytes + 8);
  in.seekg(0);
  if (!in.read(reinterpret_cast<char*>(head.data()), static_cast<std::streamsize>(head.size()))) {
    damaged(source, "it is truncated to " + std::to_string(size) + " bytes");
  }
  const uint64_t meta_bytes = metadata_length(head, size, source);
  std::string text(meta_bytes, '\0');
  if (!in.read(text.data(), static_cast<std::streamsize>(meta_bytes))) damaged(source, "it ends inside the metadata");
  Checkpoint c;
  parse_metadata(text, c, source);
  return c;
}

std::vector<uint8_t> encode(const Checkpoint& c) {
  Writer body;
  const std::string meta = metadata_json(c);
  body.put(static_cast<uint64_t>(meta.size()));
  body.put_bytes(meta.data(), meta.size());
  body.put(static_cast<uint32_t>(c.params.size() + c.buffers.size() + c.optimizer_state.size()));
  for (const NamedTensor& t : c.params) put_tensor(body, "param/" + t.name, t);
  for (const NamedTensor& t : c.buffers) put_tensor(body, "buffer/" + t.name, t);
  for (const NamedTensor& t : c.optimizer_state) put_tensor(body, t.name, t);  // already "SLOT/..."


  Writer file;
  file.put_bytes(kMagic, sizeof(kMagic));
  file.put(kFormatVersion);
  file.put(static_cast<uint64_t>(body.bytes().size()));
  file.put_bytes(body.bytes().data(), body.bytes().size());
  file.put(crc32_of(file.bytes()));
  return std::move(file.bytes());
}

Checkpoint decode(std::span<const uint8_t> bytes, const std::string& source) {
  if (bytes.size() >= sizeof(kMagic) && bytes.size() < kHeaderBytes + kFooterBytes &&
      std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) == 0) {
    damaged(source, "it is truncated to " + std::to_string(bytes.size()) + " bytes");
  }
  const uint64_t body_bytes = body_length(bytes, source);
  const uint64_t actual_body = bytes.size() - kHeaderBytes - kFooterBytes;
  if (body_bytes != actual_body) {
    damaged(source, body_bytes > actual_body
                        ? "it is truncated (" + std::to_string(bytes.size()) + " bytes, " +
                              std::to_string(body_bytes + kHeaderBytes + kFooterBytes) + " expected)"
                        : "it has " + std::to_string(actual_body - body_bytes) + " unexpected bytes after its data");
  }
  const std::span<const uint8_t> covered = bytes.first(bytes.size() - kFooterBytes);
  Reader footer(bytes.last(kFooterBytes), source);
  if (footer.get<uint32_t>("the checksum") != crc32_of(covered)) {
    damaged(source, "its CRC-32 checksum does not match its contents");
  }

  Checkpoint c;
  Reader body(bytes.subspan(kHeaderBytes, body_bytes), source);
  const uint64_t meta_bytes = body.get<uint64_t>("the metadata length");
  if (meta_bytes > body.remaining()) damaged(source, "its metadata length exceeds the file");
  parse_metadata(body.get_string(meta_bytes, "the metadata"), c, source);
  const uint32_t count = body.get<uint32_t>("the tensor count");
  for (uint32_t i = 0; i < count; ++i) {
    std::string group;
    NamedTensor t = get_tensor(body, source, group);
    if (group == "param") {
      c.params.push_back(std::move(t));
    } else if (group == "buffer") {
      c.buffers.push_back(std::move(t));
    } else if (std::find(std::begin(kOptimizerSlots), std::end(kOptimizerSlots), group) != std::end(kOptimizerSlots)) {
      t.name = group + "/" + t.name;
      c.optimizer_state.push_back(std::move(t));
    } else {
      damaged(source, "unknown tensor group '" + group + "'");
    }
  }
  if (body.remaining() != 0) damaged(source, "it has bytes after its last tensor");
  return c;
}

}  // namespace dpt::checkpoint
