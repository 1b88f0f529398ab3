// UTF-8 helpers and the GPT-2 byte <-> code point mapping.
#include "tokenizer/unicode.h"

#include <array>

namespace trine::unicode {

void DecodeLenient(std::string_view s, std::vector<uint32_t>* out) {
  const size_t n = s.size();
  const auto byte = [&](size_t i) { return static_cast<uint8_t>(s[i]); };
  const auto is_cont = [&](size_t i) { return (byte(i) & 0xC0) == 0x80; };
  size_t i = 0;
  while (i < n) {
    const uint8_t b = byte(i);
    if (b < 0x80) {
      out->push_back(b);
      i += 1;
    } else if (b < 0xC0) {  // stray continuation byte
      out->push_back(kReplacementChar);
      i += 1;
    } else if (b < 0xE0) {
      if (i + 1 < n && is_cont(i + 1)) {
        out->push_back((uint32_t{b} & 0x1F) << 6 | (byte(i + 1) & 0x3Fu));
        i += 2;
      } else {
        out->push_back(kReplacementChar);
        i += 1;
      }
    } else if (b < 0xF0) {
      if (i + 2 < n && is_cont(i + 1) && is_cont(i + 2)) {
        out->push_back((uint32_t{b} & 0x0F) << 12 | (byte(i + 1) & 0x3Fu) << 6 | (byte(i + 2) & 0x3Fu));
        i += 3;
      } else {
        out->push_back(kReplacementChar);
        i += 1;
      }
    } else if (b < 0xF8) {
      if (i + 3 < n && is_cont(i + 1) && is_cont(i + 2) && is_cont(i + 3)) {
        out->push_back((uint32_t{b} & 0x07) << 18 | (byte(i + 1) & 0x3Fu) << 12 | (byte(i + 2) & 0x3Fu) << 6 |
                       (byte(i + 3) & 0x3Fu));
        i += 4;
      } else {
        out->push_back(kReplacementChar);
        i += 1;
      }
    } else {  // 0xF8..0xFF never start a sequence
      out->push_back(kReplacementChar);
      i += 1;
    }
  }
}

void AppendUtf8(uint32_t cpt, std::string* out) {
  if (cpt > 0x10FFFF) cpt = kReplacementChar;
  if (cpt < 0x80) {
    out->push_back(static_cast<char>(cpt));
  } else if (cpt < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cpt >> 6)));
    out->push_back(static_cast<char>(0x80 | (cpt & 0x3F)));
  } else if (cpt < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cpt >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cpt >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cpt & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cpt >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cpt >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cpt >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cpt & 0x3F)));
  }
}

bool IsWhitespace(uint32_t c) {
  if (c <= 0x20) return c == 0x20 || (c >= 0x09 && c <= 0x0D);
  if (c < 0x85) return false;
  switch (c) {
    case 0x85: case 0xA0: case 0x1680: case 0x2028: case 0x2029: case 0x202F: case 0x205F: case 0x3000:
      return true;
    default:
      return c >= 0x2000 && c <= 0x200A;
  }
}

namespace {

// byte -> code point of GPT-2's printable remapping, and the reverse for code points < 0x200.
struct ByteMap {
  std::array<std::string, 256> utf8;
  std::array<int16_t, 0x200> byte_of;  // -1 when the code point is not a mapped byte
  ByteMap() {
    byte_of.fill(-1);
    const auto keeps_itself = [](int b) {
      return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    };
    uint32_t next = 0x100;
    for (int b = 0; b < 256; ++b) {
      const uint32_t cpt = keeps_itself(b) ? static_cast<uint32_t>(b) : next++;
      AppendUtf8(cpt, &utf8[static_cast<size_t>(b)]);
      byte_of[cpt] = static_cast<int16_t>(b);
    }
  }
};

const ByteMap& Bytes() {
  static const ByteMap map;
  return map;
}

}  // namespace

const std::string& ByteToUnicode(uint8_t byte) { return Bytes().utf8[byte]; }

int UnicodeToByte(uint32_t cpt) { return cpt < 0x200 ? Bytes().byte_of[cpt] : -1; }

}  // namespace trine::unicode
