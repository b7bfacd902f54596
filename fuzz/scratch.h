// Temporary files for the fuzz targets whose parsers read paths rather than bytes. Each
// fuzzing process makes one private folder under /tmp (mkdtemp), so that nothing another
// process or user left in /tmp (a classes.txt beside an .npz, say) reaches the parser,
// and removes it when it exits normally.
#pragma once

#include <stdlib.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>

namespace dpt::fuzz {

inline const std::filesystem::path& scratch_dir() {
  // Never destroyed: the atexit handler runs after static destructors registered later.
  static const std::filesystem::path& dir = *[] {
    char name[] = "/tmp/dpt_fuzz_XXXXXX";
    if (::mkdtemp(name) == nullptr) std::abort();
    auto* path = new std::filesystem::path(name);
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(scratch_dir(), ec);
    });
    return path;
  }();
  return dir;
}

// Writes `size` bytes to `path`; aborts (a harness failure, not a finding) when it cannot.
inline void write_file(const std::filesystem::path& path, const uint8_t* data, size_t size) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) std::abort();
  if (size > 0 && std::fwrite(data, 1, size, f) != size) std::abort();
  if (std::fclose(f) != 0) std::abort();
}

// A fresh file named *SUFFIX in the scratch folder (mkstemps), holding the bytes; removed
// when the object goes.
class TempFile {
 public:
  TempFile(const uint8_t* data, size_t size, const std::string& suffix) {
    std::string name = (scratch_dir() / ("inputXXXXXX" + suffix)).string();
    const int fd = ::mkstemps(name.data(), static_cast<int>(suffix.size()));
    if (fd < 0) std::abort();
    ::close(fd);
    path_ = name;
    write_file(path_, data, size);
  }
  ~TempFile() {
    std::error_code ec;
    std::filesystem::remove(path_, ec);
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace dpt::fuzz
