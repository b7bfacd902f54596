// Text from outside (file names, a file's lines, another program's output) as messages
// and JSON may hold it: the one check and the one escaping every layer uses.
#pragma once

#include <cstdio>
#include <string>
#include <string_view>

namespace dpt {

// Whether `text` is well-formed UTF-8 (no overlong forms, surrogates or code points past
// U+10FFFF): what a name must be before it goes into a checkpoint's JSON or a message.
inline bool is_utf8(std::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    const auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
    const unsigned char c = byte(i);
    int extra = 0;
    unsigned min = 0, cp = 0;
    if (c < 0x80) extra = 0, cp = c;
    else if ((c & 0xE0) == 0xC0) extra = 1, cp = c & 0x1F, min = 0x80;
    else if ((c & 0xF0) == 0xE0) extra = 2, cp = c & 0x0F, min = 0x800;
    else if ((c & 0xF8) == 0xF0) extra = 3, cp = c & 0x07, min = 0x10000;
    else return false;
    if (extra > 0 && i + static_cast<size_t>(extra) >= text.size()) return false;  // cut short
    for (int k = 1; k <= extra; ++k) {
      if ((byte(i + k) & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (byte(i + k) & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += static_cast<size_t>(extra) + 1;
  }
  return true;
}

// `text` as a message may print it: control bytes and bytes of malformed UTF-8 written as
// \xNN, the rest as it is.
inline std::string printable(std::string_view text) {
  std::string out;
  for (size_t i = 0; i < text.size();) {
    size_t len = 1;
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c >= 0xC0) len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
    if (c >= 0x20 && c != 0x7F && (c < 0x80 || (c >= 0xC0 && i + len <= text.size() && is_utf8(text.substr(i, len))))) {
      out.append(text.substr(i, len));
      i += len;
      continue;
    }
    char hex[5];
    std::snprintf(hex, sizeof hex, "\\x%02x", c);
    out += hex;
    ++i;
  }
  return out;
}

}  // namespace dpt
