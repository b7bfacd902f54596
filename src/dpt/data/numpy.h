// NumPy arrays: .npy files (format versions 1-3) and .npz archives of them, read with
// libzip. The arrays follow Keras's datasets: x_train, y_train, x_test, y_test, images of
// uint8 (scaled by 1/255) or float32 (taken as they are) in N x H x W (grey), N x C x H x W
// or N x H x W x C (C of 1 or 3, told apart by where the 1 or 3 stands), and integer
// labels of any width. An .npz holds them as x_train.npy, ...; a folder as four .npy files.
// Without x_test/y_test only a training split exists (cut one off with a held-out fraction).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "dpt/data/idx_dataset.h"
#include "dpt/data/in_memory.h"

namespace dpt::data {

struct NpyArray {
  std::string dtype;          // numpy's descr, e.g. "|u1", "<f4", "<i8"
  std::vector<int64_t> shape;
  std::vector<uint8_t> data;  // the values' bytes, C order, little-endian
};

// Parses the bytes of one .npy file; `source` names it in errors (DataError).
NpyArray parse_npy(const std::vector<uint8_t>& bytes, const std::string& source);
// The arrays of an .npz archive by name ("x_train", without ".npy"). Throws DataError.
std::vector<std::pair<std::string, NpyArray>> read_npz(const std::filesystem::path& file);

// Whether `path` is an .npz file or a folder holding x_train.npy.
bool is_numpy_source(const std::filesystem::path& path);
// Whether the .npz file or folder holds x_test and y_test.
bool numpy_has_test_split(const std::filesystem::path& path);

// One split of an .npz file or a folder of .npy files. Class names come from classes.txt
// beside them, or are the numbers up to the largest training label. Throws DataError
// naming the array and the fix for a missing array, lengths that differ, an unsupported
// dtype or rank, or a label outside the classes.
InMemoryDataset load_numpy(const std::filesystem::path& path, Split split);

}  // namespace dpt::data
