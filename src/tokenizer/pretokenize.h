// BPE pre-tokenizer: splits text into the "words" that BPE merges run inside, with the regex
// list llama.cpp uses for the vocabulary's tokenizer.ggml.pre.
//
// Semantics (llama.cpp's unicode_regex_split, reproduced by result, not by code): the text is
// decoded leniently to code points; the regexes run one after another, each one inside every
// piece the previous ones produced; a match becomes a piece and so does each stretch of text
// between matches, so no text is ever dropped. Matching is done by PCRE2 in UTF mode on a copy of
// the text in which every non-ASCII White_Space character is replaced by U+000B. This mirrors
// llama.cpp (which does the same before handing text to std::regex), so \s stays ASCII-only
// (PCRE2 without UCP) while \p{L}, \p{N}, \p{P} use PCRE2's Unicode tables. The words come back
// re-encoded from the original code points.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "tokenizer/vocab.h"

namespace trine {

class PreTokenizer {
 public:
  ~PreTokenizer();
  PreTokenizer(const PreTokenizer&) = delete;
  PreTokenizer& operator=(const PreTokenizer&) = delete;

  // Compiles `patterns` (PCRE2 syntax). kInternal if one does not compile.
  static Status Create(const std::vector<std::string>& patterns, std::unique_ptr<PreTokenizer>* out);
  // The regex list of a pre-tokenizer kind (empty for kNone/kUnsupported).
  static std::vector<std::string> Patterns(PreTokenizerKind kind);

  // Appends the words of `text` to *words. Never fails on bad UTF-8 (bad bytes become U+FFFD);
  // a regex engine error (resource limits) is returned as kInternal.
  Status Split(std::string_view text, std::vector<std::string>* words) const;

 private:
  PreTokenizer() = default;
  struct Compiled;
  std::vector<std::unique_ptr<Compiled>> regexes_;
};

}  // namespace trine
