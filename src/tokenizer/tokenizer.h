// Tokenizer: text <-> token ids over a Vocab, with llama.cpp's results (its test vectors in
// models/vocab/ are the specification).
//
//   SPM ("llama"):  spaces escaped to U+2581, a leading space added per fragment when
//                   add_space_prefix (at the start and after each special token), bigram merges by
//                   token score, byte fallback to <0xXX> tokens, <unk> when even that is missing.
//   BPE ("gpt2"):   regex pre-tokenizer chosen by tokenizer.ggml.pre (pretokenize.h), GPT-2 byte
//                   to unicode mapping, merges by rank; with ignore_merges (llama3) a pre-token
//                   that is a token is emitted as is.
//
// Special tokens: user-defined tokens are always cut out of the text before the text is
// tokenized; control and unknown tokens (<s>, <|eot_id|>, ...) only when parse_special is set,
// otherwise their text is tokenized like any other text.
//
// Bad UTF-8 never fails: SPM falls back to byte tokens, BPE sees each bad byte as U+FFFD (both as
// llama.cpp does). Thread safety: all methods are const and may run concurrently.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "tokenizer/vocab.h"

namespace trine {

class PreTokenizer;

class Tokenizer {
 public:
  ~Tokenizer();
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  // Builds on the vocabulary, shared (Llama 3's 128k-token vocabulary takes ~22 MiB resident:
  // the tokenizer keeps a reference rather than a second copy). kUnsupported for a BPE
  // vocabulary whose tokenizer.ggml.pre trine does not know.
  static Status Create(std::shared_ptr<const Vocab> vocab, std::unique_ptr<Tokenizer>* out);
  // Loads the vocabulary of an open GGUF file (a model or a vocab-only file) and builds on it.
  static Status FromGguf(const GgufFile& file, std::unique_ptr<Tokenizer>* out);

  const Vocab& vocab() const { return *vocab_; }

  // Appends the ids of `text` to *out (cleared first). add_special: BOS (and EOS) as the vocab's
  // add_bos/add_eos flags say. parse_special: control/unknown token texts in `text` become those
  // tokens.
  Status Tokenize(const std::string& text, bool add_special, bool parse_special, std::vector<TokenId>* out) const;

  // The text of one token, as llama_token_to_piece(lstrip = 0): SPM U+2581 -> space and byte
  // tokens -> the byte; BPE unmapped back to bytes. Control and unknown tokens give "" unless
  // render_special. An id out of range gives "" (use IsValid or Detokenize to get an error).
  std::string TokenToPiece(TokenId id, bool render_special) const;
  bool IsValid(TokenId id) const { return vocab_->InRange(id); }

  // The text of `ids`, as llama_detokenize: pieces concatenated; with add_space_prefix the
  // leading space of the first piece is dropped (unless the first token is BOS, as in llama.cpp);
  // remove_special drops a leading BOS / trailing EOS the vocab adds; BPE vocabs with
  // clean_spaces drop the space before . , ! ? and in front of some contractions.
  // kInvalidArgument naming the position for an id out of range.
  Status Detokenize(const std::vector<TokenId>& ids, std::string* out, bool remove_special = false,
                    bool render_special = false) const;

 private:
  explicit Tokenizer(std::shared_ptr<const Vocab> vocab);
  std::shared_ptr<const Vocab> vocab_;  // never null
  std::unique_ptr<PreTokenizer> pre_;  // BPE only
};

}  // namespace trine
