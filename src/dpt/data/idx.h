// Reader for the IDX format of (Fashion-)MNIST: a big-endian header
// 0x00 0x00 <element type> <number of dims>, one big-endian uint32 per dimension, then the
// values in row-major order. Only unsigned-byte elements (type 0x08) are supported; that
// is all the MNIST family uses.
#pragma once

#include <cstdint>
#include <filesystem>
#include <vector>

namespace dpt::data {

struct IdxArray {
  std::vector<int64_t> dims;    // e.g. {60000, 28, 28}
  std::vector<uint8_t> values;  // product(dims) values, row-major
};

// Reads a gzip-compressed or plain IDX file (zlib detects which). The file must hold
// exactly the values its header declares: a short file, a damaged or cut-off gzip stream,
// and bytes beyond the declared values all throw DataError, because any of them means
// the file is not what its header claims.
IdxArray read_idx(const std::filesystem::path& file);

}  // namespace dpt::data
