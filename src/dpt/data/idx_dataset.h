// Data sets of IDX files, the MNIST family's format (MNIST, Fashion-MNIST, KMNIST, EMNIST):
// a folder with train-images-idx3-ubyte / train-labels-idx1-ubyte and t10k-images-idx3-ubyte
// / t10k-labels-idx1-ubyte, each gzip-compressed (".gz", as Debian and the original sites
// ship them) or plain. Images are grey, of any size; all of the family draws a light object
// on a dark background. Fashion-MNIST (Zalando: clothing in 10 classes, 60,000 + 10,000
// images of 28x28) is what Debian ships, in the package dataset-fashion-mnist.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "dpt/data/fashion_mnist.h"
#include "dpt/data/in_memory.h"

namespace dpt::data {

enum class Split { train, test };
const char* split_name(Split split);  // "train" / "test"

// The file beside the IDX files that names the classes, one per line in label order.
constexpr const char* kClassNamesFile = "classes.txt";

// Loads one split of the IDX folder `dir`. The class names come from `dir`/classes.txt when
// it exists (then every label must name one of its lines), otherwise they are the numbers
// up to the largest label, or Fashion-MNIST's own when `dir`'s name says it holds
// Fashion-MNIST. Throws DataError naming the cause and the fix when the directory or a
// file is missing, a file is damaged, the image and label counts differ, or a label is
// outside the classes.
InMemoryDataset load_idx(const std::filesystem::path& dir, Split split);

// The Debian package's Fashion-MNIST: load_idx with Fashion-MNIST's class names and its
// labels checked against their 10 classes.
InMemoryDataset load_fashion_mnist(const std::filesystem::path& dir, Split split);

// Class names read from a text file, one per line (blank lines at the end ignored). Throws
// DataError naming the file when it cannot be read, holds no name or a line that is not UTF-8.
std::vector<std::string> read_class_names(const std::filesystem::path& file);

// The classes of data that names none: "0" up to the largest training label. Throws
// DataError (naming `where` and, as the fix, `names_file`) when the training labels are
// empty or leave a class number without an example: a stray label 200 among 0-9 would
// otherwise make 191 classes nothing is trained on.
std::vector<std::string> classes_of_labels(const std::vector<int64_t>& train_labels, const std::string& where,
                                           const std::filesystem::path& names_file);
}  // namespace dpt::data
