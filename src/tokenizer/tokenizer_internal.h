// Internal pieces of the tokenizer shared between tokenizer.cc, spm.cc and bpe.cc.
#pragma once

#include <string_view>
#include <vector>

#include "core/status.h"
#include "tokenizer/vocab.h"

namespace trine::internal {

// SentencePiece BPE over one text fragment whose spaces are already escaped to U+2581: start
// from single UTF-8 characters, repeatedly merge the adjacent pair whose concatenation is the
// token with the highest score (leftmost on ties), then emit each piece's token, or its bytes'
// byte tokens when the piece is not a token (<unk> when a byte has no token; an error when there
// is no <unk> either).
Status SpmEncode(const Vocab& vocab, std::string_view text, std::vector<TokenId>* out);

// Byte-level BPE over one pre-tokenizer word (raw UTF-8): map the bytes through GPT-2's byte to
// unicode table, then merge adjacent pairs by lowest merge rank (leftmost on ties). With
// `ignore_merges` a word that is a token is emitted whole. Pieces that are not tokens are emitted
// as the tokens of their single bytes where such exist (dropped otherwise, as llama.cpp does).
void BpeEncodeWord(const Vocab& vocab, std::string_view word, bool ignore_merges, std::vector<TokenId>* out);

}  // namespace trine::internal
