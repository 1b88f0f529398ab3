// Vocab: the tokenizer tables from GGUF metadata (tokenizer.ggml.*), validated: arrays of equal
// length, special token ids in range, merges well formed. Tokenizers (spm.cc, bpe.cc) build on it.
#pragma once

#include <cstdint>
#include <string>
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

enum class VocabKind { kSpm, kBpe };

class Vocab {
 public:
  VocabKind kind() const { return kind_; }
  const std::string& model_name() const { return model_name_; }  // "llama", "gpt2"
  const std::string& pre() const { return pre_; }                 // tokenizer.ggml.pre ("" if absent)
  int size() const { return static_cast<int>(tokens_.size()); }

  const std::string& token(TokenId id) const { return tokens_[static_cast<size_t>(id)]; }
  float score(TokenId id) const { return scores_.empty() ? 0.0f : scores_[static_cast<size_t>(id)]; }
  TokenType type(TokenId id) const {
    return types_.empty() ? TokenType::kNormal : types_[static_cast<size_t>(id)];
  }
  // Returns -1 when `text` is not a token.
  TokenId Find(const std::string& text) const;
  // BPE merge rank of the pair (left, right), or -1.
  int MergeRank(const std::string& left, const std::string& right) const;

  TokenId bos() const { return bos_; }  // -1 when none
  TokenId eos() const { return eos_; }
  TokenId eot() const { return eot_; }
  TokenId unk() const { return unk_; }
  TokenId pad() const { return pad_; }
  bool add_bos() const { return add_bos_; }
  bool add_eos() const { return add_eos_; }
  bool add_space_prefix() const { return add_space_prefix_; }
  // True for tokens that end generation (eos, eot, and other end-of-generation controls).
  bool IsEog(TokenId id) const;

  const std::vector<std::string>& tokens() const { return tokens_; }
  const std::vector<TokenType>& types() const { return types_; }
  const std::string& chat_template() const { return chat_template_; }

 private:
  friend Status LoadVocab(const GgufFile& file, Vocab* vocab);
  VocabKind kind_ = VocabKind::kSpm;
  std::string model_name_;
  std::string pre_;
  std::vector<std::string> tokens_;
  std::vector<float> scores_;
  std::vector<TokenType> types_;
  std::unordered_map<std::string, TokenId> index_;
  std::unordered_map<std::string, int> merges_;  // "left right" -> rank
  TokenId bos_ = -1, eos_ = -1, eot_ = -1, unk_ = -1, pad_ = -1;
  bool add_bos_ = false, add_eos_ = false, add_space_prefix_ = true;
  std::vector<TokenId> eog_;
  std::string chat_template_;
};

// Reads and validates the vocabulary. Errors name the file and key.
Status LoadVocab(const GgufFile& file, Vocab* vocab);

}  // namespace trine
