// Small UTF-8 and code point helpers for the tokenizers.
//
// Decoding is deliberately lenient and follows llama.cpp's rules, because the token ids of a text
// with bad bytes must match llama.cpp's: a byte that does not start a complete sequence becomes
// U+FFFD and consumes one byte; the continuation bytes of a sequence are checked only for their
// 10xxxxxx pattern, so overlong forms and surrogates decode to their (invalid) value.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace trine::unicode {

constexpr uint32_t kReplacementChar = 0xFFFD;

// Bytes of the sequence announced by `lead` (1 for ASCII, continuation and invalid bytes; 2, 3
// or 4 from the high bits alone). Callers clamp it to the bytes left.
inline size_t SeqLen(uint8_t lead) {
  static constexpr uint8_t kLen[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return kLen[lead >> 4];
}

// Appends the code points of `s` to *out (lenient, see above).
void DecodeLenient(std::string_view s, std::vector<uint32_t>* out);

// Appends the UTF-8 encoding of `cpt` (surrogates are encoded as 3 bytes like any other BMP
// value; values past U+10FFFF, which lenient decoding can produce, become U+FFFD).
void AppendUtf8(uint32_t cpt, std::string* out);

// Unicode White_Space property (the 25 code points of PropList.txt).
bool IsWhitespace(uint32_t cpt);

// GPT-2's bytes_to_unicode(): printable Latin-1 bytes map to themselves, the other 68 bytes to
// U+0100.. in byte order. ByteToUnicode returns the UTF-8 text of that code point.
const std::string& ByteToUnicode(uint8_t byte);
// Inverse: the byte whose mapping is `cpt`, or -1.
int UnicodeToByte(uint32_t cpt);

}  // namespace trine::unicode
