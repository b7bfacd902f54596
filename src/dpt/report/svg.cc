#include "dpt/report/svg.h"

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <stdexcept>

namespace dpt::report {

std::string strprintf(const char* format, ...) {
  va_list args;
  va_start(args, format);
  va_list copy;
  va_copy(copy, args);
  const int n = std::vsnprintf(nullptr, 0, format, copy);
  va_end(copy);
  std::string s(static_cast<size_t>(std::max(n, 0)), '\0');
  std::vsnprintf(s.data(), s.size() + 1, format, args);
  va_end(args);
  return s;
}

std::string xml_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

void write_text_file(const std::filesystem::path& file, const std::string& text, const std::string& what) {
  const auto fail = [&](int error) {
    throw std::runtime_error("cannot write " + what + " " + file.string() + ": " + std::strerror(error));
  };
  std::FILE* f = std::fopen(file.c_str(), "w");
  if (f == nullptr) fail(errno);
  errno = 0;
  const bool written = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  const int write_errno = errno;
  const bool closed = std::fclose(f) == 0;
  if (!written || !closed) fail(written ? errno : write_errno);
}

void check_writable(const std::filesystem::path& file, const std::string& what) {
  std::error_code ec;
  const bool existed = std::filesystem::exists(file, ec);
  std::FILE* f = std::fopen(file.c_str(), "a");  // "a": creates it, truncates nothing
  if (f == nullptr) throw std::runtime_error("cannot write " + what + " " + file.string() + ": " + std::strerror(errno));
  std::fclose(f);
  if (!existed) std::filesystem::remove(file, ec);
}

void write_svg_file(const std::filesystem::path& file, const std::string& svg) { write_text_file(file, svg, "SVG plot"); }

}  // namespace dpt::report
