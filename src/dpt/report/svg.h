// The small pieces every SVG picture dptrain draws shares (the training plot in
// reporters.cc, the confusion matrix of `evaluate`): printf into a string, XML escaping,
// and writing the finished text to a file (also the --trace JSON's writer).
#pragma once

#include <filesystem>
#include <string>

namespace dpt::report {

// printf into a std::string (GCC 12 has no std::format).
std::string strprintf(const char* format, ...) __attribute__((format(printf, 1, 2)));

// `s` with & < > " ' replaced by their XML entities.
std::string xml_escape(const std::string& s);

// Writes `text` to `file`; throws std::runtime_error "cannot write WHAT FILE: REASON".
void write_text_file(const std::filesystem::path& file, const std::string& text, const std::string& what);
// Throws std::runtime_error, as write_text_file would, when `file` cannot be written (a
// folder in its place, no permission); leaves an existing file as it is.
void check_writable(const std::filesystem::path& file, const std::string& what);
// write_text_file(file, svg, "SVG plot").
void write_svg_file(const std::filesystem::path& file, const std::string& svg);

}  // namespace dpt::report
