// Well-formed UTF-8 (RFC 3629): what the GGUF reader demands of keys and names and what the server
// sends in JSON. No overlong forms, no surrogates (U+D800..DFFF), nothing past U+10FFFF.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace trine {

// Bytes of the sequence a lead byte starts (1 for ASCII), or 0 for a byte that starts none: a
// continuation byte, C0/C1 (always overlong) or F5..FF (past U+10FFFF).
inline size_t Utf8LeadLength(uint8_t c) {
  if (c < 0x80) return 1;
  if ((c & 0xE0) == 0xC0) return c >= 0xC2 ? 2 : 0;
  if ((c & 0xF0) == 0xE0) return 3;
  if ((c & 0xF8) == 0xF0) return c <= 0xF4 ? 4 : 0;
  return 0;
}

// Length of the well-formed sequence at s[i] (1..4), or 0 when the bytes there are not one.
inline size_t Utf8SequenceAt(std::string_view s, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<uint8_t>(s[i + k]); };
  const size_t len = Utf8LeadLength(byte(0));
  if (len == 0 || i + len > s.size()) return 0;
  for (size_t k = 1; k < len; ++k) {
    if ((byte(k) & 0xC0) != 0x80) return 0;
  }
  // The second byte's range rules out overlong 3- and 4-byte forms, surrogates and > U+10FFFF.
  if (len == 3 && ((byte(0) == 0xE0 && byte(1) < 0xA0) || (byte(0) == 0xED && byte(1) >= 0xA0))) return 0;
  if (len == 4 && ((byte(0) == 0xF0 && byte(1) < 0x90) || (byte(0) == 0xF4 && byte(1) >= 0x90))) return 0;
  return len;
}

inline bool IsValidUtf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const size_t len = Utf8SequenceAt(s, i);
    if (len == 0) return false;
    i += len;
  }
  return true;
}

}  // namespace trine
