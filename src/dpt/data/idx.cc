#include "dpt/data/idx.h"

#include <zlib.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <climits>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <string>

#include "dpt/data/data_error.h"

namespace dpt::data {
namespace {

constexpr uint8_t kUnsignedByteType = 0x08;
// A header can claim any size; reading in chunks means a bogus header costs a
// "truncated" error rather than a giant allocation.
constexpr size_t kReadChunkBytes = size_t{1} << 20;

// "0x" followed by the bytes in hex, most significant first: {0x1F, 0x8B} -> "0x1F8B".
std::string hex(std::initializer_list<uint8_t> bytes) {
  static constexpr char digits[] = "0123456789ABCDEF";
  std::string out = "0x";
  for (uint8_t b : bytes) {
    out += digits[b >> 4];
    out += digits[b & 0xF];
  }
  return out;
}

[[noreturn]] void fail(const std::filesystem::path& file, const std::string& cause_and_fix) {
  throw DataError("IDX file " + in_quotes(file) + ": " + cause_and_fix);
}

struct GzCloser {
  void operator()(gzFile_s* handle) const { gzclose(handle); }
};
using GzHandle = std::unique_ptr<gzFile_s, GzCloser>;

class IdxStream {
 public:
  explicit IdxStream(const std::filesystem::path& file) : file_(file) {
    std::error_code ec;
    if (!std::filesystem::exists(file, ec)) {
      fail(file, "file does not exist; check the path");
    }
    if (!std::filesystem::is_regular_file(file, ec)) {
      fail(file, "not a regular file; pass the path of an IDX file");
    }
    errno = 0;
    handle_.reset(gzopen(file.c_str(), "rb"));
    if (!handle_) {
      const std::string reason = errno != 0 ? std::strerror(errno) : "out of memory";
      fail(file, "cannot open (" + reason + "); check that the file is readable");
    }
    gzbuffer(handle_.get(), 256 * 1024);
  }

  // Reads up to `count` bytes into `out`; returns how many arrived before end of file.
  // A damaged or cut-off gzip stream throws, so a short count always means a short file.
  size_t read(uint8_t* out, size_t count) {
    size_t total = 0;
    while (total < count) {
      const unsigned want = static_cast<unsigned>(std::min<size_t>(count - total, INT_MAX));
      const int got = gzread(handle_.get(), out + total, want);
      throw_if_stream_error();
      if (got <= 0) break;
      total += static_cast<size_t>(got);
    }
    return total;
  }

  // zlib reports a gzip stream that ends early as Z_BUF_ERROR alongside a short read,
  // not as a failed read, so the error state must be checked after every call.
  void throw_if_stream_error() {
    int code = Z_OK;
    const char* message = gzerror(handle_.get(), &code);
    if (code == Z_OK) return;
    std::string detail = message != nullptr ? message : "unknown error";
    // zlib prefixes its message with the path, which our message already names.
    const std::string path_prefix = file_.string() + ": ";
    if (detail.starts_with(path_prefix)) detail.erase(0, path_prefix.size());
    if (code == Z_ERRNO) {
      fail(file_, std::string("read error (") + std::strerror(errno) + "); check the file and the disk");
    }
    if (code == Z_BUF_ERROR) {
      fail(file_, "gzip stream is truncated (zlib: " + detail + "); the file was cut off, re-download or reinstall it");
    }
    fail(file_, "gzip stream is corrupt (zlib: " + detail + "); re-download or reinstall the file");
  }

 private:
  std::filesystem::path file_;
  GzHandle handle_;
};

uint32_t big_endian_u32(const uint8_t* bytes) {
  return (uint32_t{bytes[0]} << 24) | (uint32_t{bytes[1]} << 16) | (uint32_t{bytes[2]} << 8) | uint32_t{bytes[3]};
}

std::string dims_str(const std::vector<int64_t>& dims) {
  std::string out = "[";
  for (size_t i = 0; i < dims.size(); ++i) out += (i ? ", " : "") + std::to_string(dims[i]);
  return out + "]";
}

}  // namespace

IdxArray read_idx(const std::filesystem::path& file) {
  IdxStream stream(file);

  std::array<uint8_t, 4> magic{};
  if (stream.read(magic.data(), magic.size()) != magic.size()) {
    fail(file, "file is shorter than the 4-byte IDX header; it is truncated or not an IDX file");
  }
  if (magic[0] != 0 || magic[1] != 0) {
    fail(file, "wrong magic number " + hex({magic[0], magic[1], magic[2], magic[3]}) +
                   ", expected 0x0000TTDD (TT = element type, DD = number of dimensions); "
                   "this is not an IDX file");
  }
  if (magic[2] != kUnsignedByteType) {
    fail(file, "element type " + hex({magic[2]}) +
                   " is not supported, only 0x08 (unsigned byte) is; use an unsigned-byte IDX file");
  }
  const unsigned num_dims = magic[3];
  if (num_dims == 0) {
    fail(file, "header declares 0 dimensions; the file is corrupt");
  }

  IdxArray array;
  std::vector<uint8_t> dim_bytes(4 * num_dims);
  if (stream.read(dim_bytes.data(), dim_bytes.size()) != dim_bytes.size()) {
    fail(file, "file ends inside the header (" + std::to_string(num_dims) +
                   " dimensions declared); it is truncated, re-download or reinstall it");
  }
  uint64_t expected = 1;
  for (unsigned d = 0; d < num_dims; ++d) {
    const uint32_t size = big_endian_u32(&dim_bytes[4 * d]);
    array.dims.push_back(size);
    // 2^40 bytes is far beyond any real IDX file; the cap keeps the product from overflowing.
    if (size != 0 && expected > (uint64_t{1} << 40) / size) {
      fail(file,
           "header declares dimensions " + dims_str(array.dims) + "..., more than 2^40 values; the file is corrupt");
    }
    expected *= size;
  }

  while (array.values.size() < expected) {
    const size_t have = array.values.size();
    const size_t chunk = static_cast<size_t>(std::min<uint64_t>(expected - have, kReadChunkBytes));
    array.values.resize(have + chunk);
    const size_t got = stream.read(array.values.data() + have, chunk);
    if (got < chunk) {
      fail(file, "file is truncated: header dimensions " + dims_str(array.dims) + " need " + std::to_string(expected) +
                     " values but only " + std::to_string(have + got) + " follow; re-download or reinstall it");
    }
  }

  // Reading past the values lets zlib check the gzip trailer (CRC and length), so a
  // stream damaged or cut off after the last value is caught too.
  uint8_t extra = 0;
  if (stream.read(&extra, 1) != 0) {
    fail(file, "file has data after the " + std::to_string(expected) + " values that header dimensions " +
                   dims_str(array.dims) + " declare; it is corrupt or not an IDX file");
  }
  return array;
}

}  // namespace dpt::data
