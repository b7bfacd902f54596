#include "dpt/data/numpy.h"

#include <zip.h>

#include <algorithm>
#include <charconv>
#include <climits>
#include <cstring>
#include <memory>
#include <regex>

#include "dpt/data/data_error.h"
#include "dpt/data/pictures.h"

namespace dpt::data {
namespace {

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + (shape.size() == 1 ? ",)" : ")");
}

template <typename T>
T little(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));  // x86 and arm64 are little-endian, as .npy files written there are
  return v;
}

std::regex field_pattern(const std::string& key) {
  return std::regex("['\"]" + key + "['\"]\\s*:\\s*('[^']*'|\"[^\"]*\"|True|False|\\([^)]*\\))");
}

// The .npy header is a Python dict literal: {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
std::string header_field(const std::string& header, const std::string& key, const std::string& source) {
  // Compiled once per key: the three keys every .npy header has.
  static const std::regex descr = field_pattern("descr"), fortran = field_pattern("fortran_order"),
                          shape = field_pattern("shape");
  const std::regex& pattern = key == "descr" ? descr : key == "fortran_order" ? fortran : shape;
  std::smatch m;
  if (!std::regex_search(header, m, pattern)) {
    throw DataError("NumPy file " + source + " has no '" + key + "' in its header; it is not a valid .npy file");
  }
  std::string v = m[1].str();
  if (v.front() == '\'' || v.front() == '"') v = v.substr(1, v.size() - 2);
  return v;
}

struct Arrays {
  std::string where;  // for messages: the .npz file or the folder
  std::vector<std::pair<std::string, NpyArray>> arrays;
  const NpyArray* find(const std::string& name) const {
    for (const auto& [n, a] : arrays) {
      if (n == name) return &a;
    }
    return nullptr;
  }
};

Arrays read_arrays(const std::filesystem::path& path) {
  Arrays out;
  out.where = in_quotes(path);
  if (std::filesystem::is_directory(path)) {
    for (const char* name : {"x_train", "y_train", "x_test", "y_test"}) {
      const std::filesystem::path file = path / (std::string(name) + ".npy");
      if (std::filesystem::exists(file)) out.arrays.emplace_back(name, parse_npy(read_file(file), in_quotes(file)));
    }
  } else {
    out.arrays = read_npz(path);
  }
  return out;
}

const NpyArray& require(const Arrays& a, const std::string& name) {
  const NpyArray* array = a.find(name);
  if (!array) {
    throw DataError("NumPy data " + a.where + " has no array '" + name +
                    "'; save the images as x_train / x_test and the labels as y_train / y_test (Keras's layout)");
  }
  return *array;
}

std::vector<int64_t> labels_of(const NpyArray& y, const std::string& name, const std::string& where) {
  const std::string& t = y.dtype;
  const bool integer = t.size() == 3 && (t[1] == 'i' || t[1] == 'u') && (t[0] == '<' || t[0] == '|');
  if (!integer || y.shape.size() != 1) {
    throw DataError("NumPy array '" + name + "' in " + where + " has dtype '" + t + "' and shape " + shape_text(y.shape) +
                    "; labels must be one integer class index per image (shape (N,)): save them with astype('int64')");
  }
  const int width = t[2] - '0';
  std::vector<int64_t> labels(static_cast<size_t>(y.shape[0]));
  for (size_t i = 0; i < labels.size(); ++i) {
    const uint8_t* p = y.data.data() + i * width;
    const bool s = t[1] == 'i';
    switch (width) {
      case 1: labels[i] = s ? little<int8_t>(p) : little<uint8_t>(p); break;
      case 2: labels[i] = s ? little<int16_t>(p) : little<uint16_t>(p); break;
      case 4: labels[i] = s ? little<int32_t>(p) : little<uint32_t>(p); break;
      case 8: labels[i] = s ? little<int64_t>(p) : static_cast<int64_t>(little<uint64_t>(p)); break;
      default: throw DataError("NumPy array '" + name + "' in " + where + " has dtype '" + t + "'; save the labels as int64");
    }
    if (labels[i] < 0) {
      throw DataError("NumPy array '" + name + "' in " + where + ": the label at index " + std::to_string(i) + " is " +
                      std::to_string(labels[i]) + "; labels are class indices from 0");
    }
  }
  return labels;
}

// Fills data's pixels or values from x, in NCHW order.
void images_of(const NpyArray& x, const std::string& name, const std::string& where, InMemoryDataset& data) {
  const bool u8 = x.dtype == "|u1" || x.dtype == "<u1";
  if (!u8 && x.dtype != "<f4") {
    throw DataError("NumPy array '" + name + "' in " + where + " has dtype '" + x.dtype +
                    "'; images must be uint8 ('|u1') or float32 ('<f4'): convert them with astype");
  }
  const std::vector<int64_t>& s = x.shape;
  bool channels_last = false;
  if (s.size() == 3) {
    data.channels = 1, data.rows = s[1], data.cols = s[2];
  } else if (s.size() == 4 && (s[3] == 1 || s[3] == 3) && !(s[1] == 1 || s[1] == 3)) {
    channels_last = true, data.channels = s[3], data.rows = s[1], data.cols = s[2];
  } else if (s.size() == 4 && (s[1] == 1 || s[1] == 3)) {
    data.channels = s[1], data.rows = s[2], data.cols = s[3];
  } else {
    throw DataError("NumPy array '" + name + "' in " + where + " has shape " + shape_text(s) +
                    "; images must be N x H x W, N x C x H x W or N x H x W x C with C 1 or 3");
  }
  if (data.rows < 1 || data.cols < 1) {
    throw DataError("NumPy array '" + name + "' in " + where + " has shape " + shape_text(s) +
                    ": images of 0 pixels; save images of at least 1 x 1");
  }
  const int64_t n = s[0], plane = data.rows * data.cols, image = plane * data.channels;
  const auto source = [&](int64_t i, int64_t c, int64_t p) {  // element index in x's order
    return channels_last ? (i * plane + p) * data.channels + c : (i * data.channels + c) * plane + p;
  };
  if (u8) data.pixels.resize(static_cast<size_t>(n * image));
  else data.values.resize(static_cast<size_t>(n * image));
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t c = 0; c < data.channels; ++c) {
      for (int64_t p = 0; p < plane; ++p) {
        const size_t to = static_cast<size_t>(i * image + c * plane + p), from = static_cast<size_t>(source(i, c, p));
        if (u8) data.pixels[to] = x.data[from];
        else data.values[to] = little<float>(x.data.data() + from * 4);
      }
    }
  }
}

}  // namespace

NpyArray parse_npy(const std::vector<uint8_t>& bytes, const std::string& source) {
  static const uint8_t kMagic[] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
  if (bytes.size() < 10 || !std::equal(std::begin(kMagic), std::end(kMagic), bytes.begin())) {
    throw DataError("NumPy file " + source + " does not start with the .npy magic; save it with numpy.save");
  }
  const int major = bytes[6];
  const size_t length_bytes = major == 1 ? 2 : 4;
  if (bytes.size() < 8 + length_bytes) throw DataError("NumPy file " + source + " is cut short in its header");
  const size_t header_len =
      length_bytes == 2 ? little<uint16_t>(bytes.data() + 8) : static_cast<size_t>(little<uint32_t>(bytes.data() + 8));
  const size_t start = 8 + length_bytes + header_len;
  if (bytes.size() < start) throw DataError("NumPy file " + source + " is cut short in its header");
  const std::string header(bytes.begin() + 8 + static_cast<std::ptrdiff_t>(length_bytes),
                           bytes.begin() + static_cast<std::ptrdiff_t>(start));
  NpyArray a;
  a.dtype = header_field(header, "descr", source);
  if (header_field(header, "fortran_order", source) != "False") {
    throw DataError("NumPy file " + source + " is in Fortran order; save it in C order (numpy.ascontiguousarray)");
  }
  const std::string shape = header_field(header, "shape", source);
  // The values the shape declares, in 64 bits with every product checked: a crafted header
  // whose dimensions multiply past 2^64 must not wrap to a count the data seems to match.
  // A tuple of non-negative integers: "()", "(5,)", "(2, 3)"; "(-5,)" or "(2 3)" is damage.
  static const std::regex tuple("\\(\\s*(\\d+\\s*,\\s*)*(\\d+\\s*,?\\s*)?\\)");
  if (!std::regex_match(shape, tuple)) {
    throw DataError("NumPy file " + source + " declares the shape '" + printable(shape) +
                    "', not a tuple of sizes; it is damaged, save it again");
  }
  uint64_t count = 1;
  bool overflow = false;
  static const std::regex number("\\d+");
  for (std::sregex_iterator it(shape.begin(), shape.end(), number), end; it != end; ++it) {
    const std::string digits = it->str();
    uint64_t d = 0;
    const auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), d);
    if (ec != std::errc() || d > static_cast<uint64_t>(INT64_MAX)) {
      throw DataError("NumPy file " + source + " declares a dimension of " + digits +
                      ", more than any array holds; it is damaged, save it again");
    }
    a.shape.push_back(static_cast<int64_t>(d));
    overflow = overflow || __builtin_mul_overflow(count, d, &count);
  }
  const std::string& t = a.dtype;
  const bool known = t.size() == 3 && (t[0] == '<' || t[0] == '|' || (t[0] == '>' && t[2] == '1')) &&
                     (t[1] == 'u' || t[1] == 'i' || t[1] == 'f' || t[1] == 'b') &&
                     (t[2] == '1' || t[2] == '2' || t[2] == '4' || t[2] == '8');
  if (!known) {
    const bool objects = t.size() >= 2 && t[1] == 'O';
    throw DataError("NumPy file " + source + " has dtype '" + printable(t) + "'" +
                    (objects ? " (Python objects)" : t.size() == 3 && t[0] == '>' ? " (big-endian)" : "") +
                    ", which dptrain does not read; save numbers, little-endian: images as uint8 or float32, labels "
                    "as int64 (e.g. numpy.save(f, a.astype('int64')))");
  }
  const uint64_t width = static_cast<uint64_t>(t[2] - '0');
  const uint64_t data_bytes = bytes.size() - start;
  if (overflow || count > data_bytes / width || count * width != data_bytes) {
    throw DataError("NumPy file " + source + " holds " + std::to_string(data_bytes) + " data bytes where its header " +
                    "declares shape " + shape_text(a.shape) + " of '" + t + "' (" +
                    (overflow ? "more than 2^64 values" : std::to_string(count) + " values") +
                    "); it is cut short or damaged, save it again");
  }
  a.data.assign(bytes.begin() + static_cast<std::ptrdiff_t>(start), bytes.end());
  return a;
}

std::vector<std::pair<std::string, NpyArray>> read_npz(const std::filesystem::path& file) {
  int error = 0;
  std::unique_ptr<zip_t, int (*)(zip_t*)> archive(zip_open(file.c_str(), ZIP_RDONLY, &error), zip_close);
  if (!archive) {
    zip_error_t ze;
    zip_error_init_with_code(&ze, error);
    const std::string why = zip_error_strerror(&ze);
    zip_error_fini(&ze);
    throw DataError("cannot open the NumPy archive " + in_quotes(file) + " (" + why + "); save it with numpy.savez");
  }
  std::vector<std::pair<std::string, NpyArray>> arrays;
  const zip_int64_t entries = zip_get_num_entries(archive.get(), 0);
  for (zip_int64_t i = 0; i < entries; ++i) {
    zip_stat_t st;
    if (zip_stat_index(archive.get(), static_cast<zip_uint64_t>(i), 0, &st) != 0) continue;
    std::string name = st.name;
    if (name.size() < 4 || name.substr(name.size() - 4) != ".npy") continue;
    std::unique_ptr<zip_file_t, int (*)(zip_file_t*)> f(zip_fopen_index(archive.get(), static_cast<zip_uint64_t>(i), 0),
                                                         zip_fclose);
    // Read in pieces as they arrive: the size the archive declares is not trusted with one
    // allocation (a damaged entry would cost a giant allocation rather than an error).
    std::vector<uint8_t> bytes;
    constexpr zip_uint64_t kPiece = zip_uint64_t{1} << 20;
    bool whole = f != nullptr;
    while (whole && bytes.size() < st.size) {
      const size_t have = bytes.size();
      const zip_uint64_t piece = std::min<zip_uint64_t>(st.size - have, kPiece);
      bytes.resize(have + piece);
      whole = zip_fread(f.get(), bytes.data() + have, piece) == static_cast<zip_int64_t>(piece);
    }
    // Reading past the end lets libzip check the entry's CRC-32 (it does so at its end).
    uint8_t extra = 0;
    whole = whole && zip_fread(f.get(), &extra, 1) == 0;
    if (!whole) {
      throw DataError("cannot read '" + printable(name) + "' from the NumPy archive " + in_quotes(file) +
                      "; the archive is damaged, save it again with numpy.savez");
    }
    arrays.emplace_back(name.substr(0, name.size() - 4), parse_npy(bytes, "'" + name + "' in " + in_quotes(file)));
  }
  return arrays;
}

bool is_numpy_source(const std::filesystem::path& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) return std::filesystem::exists(path / "x_train.npy", ec);
  return path.extension() == ".npz";
}

bool numpy_has_test_split(const std::filesystem::path& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) return std::filesystem::exists(path / "x_test.npy", ec);
  const Arrays a = read_arrays(path);
  return a.find("x_test") && a.find("y_test");
}

InMemoryDataset load_numpy(const std::filesystem::path& path, Split split) {
  const Arrays arrays = read_arrays(path);
  const std::string x_name = split == Split::train ? "x_train" : "x_test";
  const std::string y_name = split == Split::train ? "y_train" : "y_test";
  const NpyArray& x = require(arrays, x_name);
  const NpyArray& y = require(arrays, y_name);
  InMemoryDataset data;
  images_of(x, x_name, arrays.where, data);
  data.labels = labels_of(y, y_name, arrays.where);
  if (static_cast<int64_t>(data.labels.size()) != x.shape[0]) {
    throw DataError("NumPy arrays '" + x_name + "' (" + std::to_string(x.shape[0]) + " images) and '" + y_name + "' (" +
                    std::to_string(data.labels.size()) + " labels) in " + arrays.where +
                    " differ in length; save one label per image");
  }
  const std::filesystem::path names = (std::filesystem::is_directory(path) ? path : path.parent_path()) / kClassNamesFile;
  std::error_code ec;
  if (std::filesystem::exists(names, ec)) {
    data.class_names = read_class_names(names);
  } else {
    const std::vector<int64_t> train = split == Split::train ? data.labels : labels_of(require(arrays, "y_train"), "y_train", arrays.where);
    data.class_names = classes_of_labels(train, arrays.where, names);
  }
  const int64_t classes = static_cast<int64_t>(data.class_names.size());
  for (size_t i = 0; i < data.labels.size(); ++i) {
    if (data.labels[i] >= classes) {
      throw DataError("NumPy array '" + y_name + "' in " + arrays.where + ": the label at index " + std::to_string(i) + " is " +
                      std::to_string(data.labels[i]) + ", outside the " + std::to_string(classes) +
                      " classes; name every class in " + in_quotes(names) + ", one per line");
    }
  }
  return data;
}

}  // namespace dpt::data
