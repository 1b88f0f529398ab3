// Vocab: the tokenizer tables from GGUF metadata (tokenizer.ggml.*), validated: arrays of equal
// length, special token ids in range, merges well formed. Tokenizers (spm.cc, bpe.cc) build on it.
//
// Besides the raw tables it holds what the tokenizers look up on every call, built once at load:
// a text -> id index and a (left id, right id) -> merge rank table (open addressing, ids only, so
// a Vocab copies and moves safely), the byte-fallback token of each byte, the special tokens
// (control, user-defined, unknown) longest first, and llama.cpp's per-token attributes including
// its name-based fix-ups (end-of-generation texts such as <|eot_id|> are marked control).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/status.h"
#include "gguf/gguf_reader.h"

namespace trine {

using TokenId = int32_t;

// llama.cpp's token attribute types (tokenizer.ggml.token_type).
enum class TokenType : int32_t {
  kUndefined = 0,
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

// Attribute bits of a token (llama.cpp's llama_token_attr subset). A token can carry more than
// one: a normal token whose text names an end-of-generation marker also gets kAttrControl.
enum TokenAttr : uint16_t {
  kAttrUnknown = 1u << 0,
  kAttrUnused = 1u << 1,
  kAttrNormal = 1u << 2,
  kAttrControl = 1u << 3,
  kAttrUserDefined = 1u << 4,
  kAttrByte = 1u << 5,
};

enum class VocabKind { kSpm, kBpe };

// The pre-tokenizer (regex family) of a BPE vocabulary, chosen from tokenizer.ggml.pre the way
// llama.cpp's llama-vocab.cpp maps the names. kNone for SPM; kUnsupported for a name trine does
// not know (the vocabulary still loads, but no Tokenizer can be built over it).
enum class PreTokenizerKind {
  kNone,
  kDefault,        // "default" and a missing key
  kGpt2,           // gpt-2, mpt, olmo, phi-2, ...
  kLlama3,         // llama3, llama-bpe, dbrx, smaug-bpe, ...
  kQwen2,          // qwen2, stablelm2, megrez, ...
  kDeepseekLlm,    // deepseek-llm
  kDeepseekCoder,  // deepseek-coder
  kFalcon,         // falcon
  kStarcoder,      // starcoder, refact, command-r, smollm, codeshell, exaone, minerva-7b
  kBloom,          // bloom, gpt3-finnish, poro-chat
  kUnsupported,
};

class Vocab {
 public:
  VocabKind kind() const { return kind_; }
  const std::string& model_name() const { return model_name_; }  // "llama", "gpt2"
  const std::string& pre() const { return pre_; }                 // tokenizer.ggml.pre ("" if absent)
  int size() const { return static_cast<int>(tokens_.size()); }
  bool InRange(TokenId id) const { return id >= 0 && id < size(); }

  const std::string& token(TokenId id) const { return tokens_[static_cast<size_t>(id)]; }
  float score(TokenId id) const { return scores_.empty() ? 0.0f : scores_[static_cast<size_t>(id)]; }
  TokenType type(TokenId id) const {
    return types_.empty() ? TokenType::kNormal : types_[static_cast<size_t>(id)];
  }
  uint16_t attr(TokenId id) const { return attrs_[static_cast<size_t>(id)]; }

  // Returns -1 when `text` is not a token.
  TokenId Find(std::string_view text) const;
  // BPE merge rank of the pair (left, right), or -1.
  int MergeRank(std::string_view left, std::string_view right) const;
  // Merge of two tokens: its rank (-1 when the pair is not a merge) and the id of the merged
  // text (-1 when the merged text is not a token).
  int MergeRank(TokenId left, TokenId right, TokenId* merged) const;
  // True when some merge has a side that is not a token (then only the string overload finds it).
  bool has_text_merges() const { return !text_merges_.empty(); }

  // Byte fallback token: SPM "<0xXX>" (else the one-byte text), BPE the GPT-2 mapped character
  // of the byte. -1 when the vocabulary has none.
  TokenId byte_token(uint8_t byte) const { return byte_tokens_[byte]; }

  // Control, user-defined and unknown tokens, longest text first (ties by id): the texts that
  // special-token parsing looks for.
  const std::vector<TokenId>& special_tokens() const { return special_tokens_; }

  TokenId bos() const { return bos_; }  // -1 when none
  TokenId eos() const { return eos_; }
  TokenId eot() const { return eot_; }
  TokenId unk() const { return unk_; }
  TokenId pad() const { return pad_; }
  bool add_bos() const { return add_bos_; }
  bool add_eos() const { return add_eos_; }
  bool add_space_prefix() const { return add_space_prefix_; }
  // BPE settings derived from tokenizer.ggml.pre.
  PreTokenizerKind pre_kind() const { return pre_kind_; }
  bool ignore_merges() const { return ignore_merges_; }  // emit a pre-token that is a token as is
  bool clean_spaces() const { return clean_spaces_; }    // detokenize drops " ," " ." ... (BPE)
  // True for tokens that end generation (eos, eot, and other end-of-generation controls).
  bool IsEog(TokenId id) const;

  const std::vector<std::string>& tokens() const { return tokens_; }
  const std::vector<TokenType>& types() const { return types_; }
  const std::string& chat_template() const { return chat_template_; }

 private:
  friend Status LoadVocab(const GgufFile& file, Vocab* vocab);
  void BuildIndex();
  Status BuildMerges(const std::vector<std::string>& merges, const std::string& path);
  void BuildAttributes();

  VocabKind kind_ = VocabKind::kSpm;
  std::string model_name_;
  std::string pre_;
  std::vector<std::string> tokens_;
  std::vector<float> scores_;
  std::vector<TokenType> types_;
  std::vector<uint16_t> attrs_;
  // text -> id: open addressing over token ids (-1 = empty slot), hashed by token text.
  std::vector<TokenId> index_slots_;
  // (left id << 32 | right id) -> {rank, merged id}: open addressing, key ~0 = empty slot.
  struct MergeSlot {
    uint64_t key;
    int32_t rank;
    TokenId merged;
  };
  std::vector<MergeSlot> merge_slots_;
  std::unordered_map<std::string, int> text_merges_;  // "left right" -> rank, sides not tokens
  std::array<TokenId, 256> byte_tokens_{};
  std::vector<TokenId> special_tokens_;
  TokenId bos_ = -1, eos_ = -1, eot_ = -1, eom_ = -1, unk_ = -1, pad_ = -1;
  bool add_bos_ = false, add_eos_ = false, add_space_prefix_ = true;
  PreTokenizerKind pre_kind_ = PreTokenizerKind::kNone;
  bool ignore_merges_ = false, clean_spaces_ = false;
  std::vector<TokenId> eog_;
  std::string chat_template_;
};

// Reads and validates the vocabulary. Errors name the file and key.
Status LoadVocab(const GgufFile& file, Vocab* vocab);

// Name of a pre-tokenizer kind ("llama3", "gpt-2", ...), for messages.
const char* PreTokenizerKindName(PreTokenizerKind kind);

}  // namespace trine
