// Vocabulary loading and validation from tokenizer.ggml.* metadata.
#include "tokenizer/vocab.h"

#include <algorithm>
#include <cmath>

namespace trine {

TokenId Vocab::Find(const std::string& text) const {
  auto it = index_.find(text);
  return it == index_.end() ? -1 : it->second;
}

int Vocab::MergeRank(const std::string& left, const std::string& right) const {
  auto it = merges_.find(left + " " + right);
  return it == merges_.end() ? -1 : it->second;
}

bool Vocab::IsEog(TokenId id) const {
  return id >= 0 && std::find(eog_.begin(), eog_.end(), id) != eog_.end();
}

Status LoadVocab(const GgufFile& f, Vocab* out) {
  Vocab v;
  const std::string& path = f.path();
  bool found = false;
  TRINE_RETURN_IF_ERROR(f.GetString("tokenizer.ggml.model", &v.model_name_, &found));
  if (!found) return InvalidFile(path + ": missing required key 'tokenizer.ggml.model'");
  if (v.model_name_ == "llama") {
    v.kind_ = VocabKind::kSpm;
  } else if (v.model_name_ == "gpt2") {
    v.kind_ = VocabKind::kBpe;
  } else {
    return Unsupported(path + ": tokenizer model '" + v.model_name_ + "' is not supported (llama, gpt2)");
  }
  TRINE_RETURN_IF_ERROR(f.GetString("tokenizer.ggml.pre", &v.pre_, &found));

  const GgufValue* toks = f.Find("tokenizer.ggml.tokens");
  if (!toks) return InvalidFile(path + ": missing required key 'tokenizer.ggml.tokens'");
  if (!toks->is_array() || toks->elem_type() != GgufType::kString) {
    return InvalidFile(path + ": key 'tokenizer.ggml.tokens' must be an array of strings");
  }
  if (toks->count() == 0) return InvalidFile(path + ": key 'tokenizer.ggml.tokens' is empty");
  if (toks->count() > (1u << 24)) return InvalidFile(path + ": vocabulary of " + std::to_string(toks->count()) + " tokens is too large");
  v.tokens_ = toks->strings();
  const uint64_t n = toks->count();

  if (const GgufValue* sc = f.Find("tokenizer.ggml.scores")) {
    if (!sc->is_array() || sc->elem_type() != GgufType::kF32 || sc->count() != n) {
      return InvalidFile(path + ": key 'tokenizer.ggml.scores' must be an f32 array of " + std::to_string(n) +
                         " entries");
    }
    v.scores_.resize(n);
    for (uint64_t i = 0; i < n; ++i) {
      double d = 0;
      sc->DoubleAt(i, &d);
      v.scores_[i] = static_cast<float>(d);
    }
  }
  if (const GgufValue* ty = f.Find("tokenizer.ggml.token_type")) {
    if (!ty->is_array() || ty->elem_type() != GgufType::kI32 || ty->count() != n) {
      return InvalidFile(path + ": key 'tokenizer.ggml.token_type' must be an i32 array of " + std::to_string(n) +
                         " entries");
    }
    v.types_.resize(n);
    for (uint64_t i = 0; i < n; ++i) {
      int64_t t = 0;
      ty->IntAt(i, &t);
      if (t < 0 || t > 6) {
        return InvalidFile(path + ": tokenizer.ggml.token_type[" + std::to_string(i) + "] = " + std::to_string(t) +
                           " is not a valid token type");
      }
      v.types_[i] = static_cast<TokenType>(t);
    }
  }
  if (const GgufValue* mg = f.Find("tokenizer.ggml.merges")) {
    if (!mg->is_array() || mg->elem_type() != GgufType::kString) {
      return InvalidFile(path + ": key 'tokenizer.ggml.merges' must be an array of strings");
    }
    v.merges_.reserve(mg->count());
    for (uint64_t i = 0; i < mg->count(); ++i) {
      const std::string& m = mg->strings()[i];
      const size_t sp = m.find(' ', 1);
      if (sp == std::string::npos || sp + 1 >= m.size()) {
        return InvalidFile(path + ": tokenizer.ggml.merges[" + std::to_string(i) + "] is not 'left right'");
      }
      v.merges_.emplace(m, static_cast<int>(i));
    }
  } else if (v.kind_ == VocabKind::kBpe) {
    return InvalidFile(path + ": missing required key 'tokenizer.ggml.merges' for a gpt2 tokenizer");
  }

  v.index_.reserve(n);
  for (uint64_t i = 0; i < n; ++i) v.index_.emplace(v.tokens_[i], static_cast<TokenId>(i));

  auto special = [&](const char* key, TokenId* id) -> Status {
    int64_t x = 0;
    bool has = false;
    TRINE_RETURN_IF_ERROR(f.GetInt(key, &x, &has));
    if (!has) return Status::Ok();
    if (x < 0 || static_cast<uint64_t>(x) >= n) {
      // llama.cpp writes -1 (as u32 0xFFFFFFFF) for "none" in some converters; anything else is an error.
      if (x == 0xFFFFFFFFLL || x == -1) return Status::Ok();
      return InvalidFile(path + ": key '" + std::string(key) + "' = " + std::to_string(x) +
                         " is not a token id (vocabulary has " + std::to_string(n) + " tokens)");
    }
    *id = static_cast<TokenId>(x);
    return Status::Ok();
  };
  TRINE_RETURN_IF_ERROR(special("tokenizer.ggml.bos_token_id", &v.bos_));
  TRINE_RETURN_IF_ERROR(special("tokenizer.ggml.eos_token_id", &v.eos_));
  TRINE_RETURN_IF_ERROR(special("tokenizer.ggml.eot_token_id", &v.eot_));
  TRINE_RETURN_IF_ERROR(special("tokenizer.ggml.unknown_token_id", &v.unk_));
  TRINE_RETURN_IF_ERROR(special("tokenizer.ggml.padding_token_id", &v.pad_));

  // Defaults follow llama.cpp: SPM adds BOS and a leading space; BPE adds BOS when asked.
  v.add_bos_ = v.kind_ == VocabKind::kSpm;
  v.add_space_prefix_ = v.kind_ == VocabKind::kSpm;
  if (v.kind_ == VocabKind::kBpe && v.bos_ < 0) v.add_bos_ = false;
  bool b = false;
  TRINE_RETURN_IF_ERROR(f.GetBool("tokenizer.ggml.add_bos_token", &b, &found));
  if (found) v.add_bos_ = b;
  TRINE_RETURN_IF_ERROR(f.GetBool("tokenizer.ggml.add_eos_token", &b, &found));
  if (found) v.add_eos_ = b;
  TRINE_RETURN_IF_ERROR(f.GetBool("tokenizer.ggml.add_space_prefix", &b, &found));
  if (found) v.add_space_prefix_ = b;
  if (v.kind_ == VocabKind::kSpm && v.bos_ < 0 && n > 1) v.bos_ = 1;
  if (v.kind_ == VocabKind::kSpm && v.eos_ < 0 && n > 2) v.eos_ = 2;
  if (v.add_bos_ && v.bos_ < 0) return InvalidFile(path + ": add_bos_token is set but there is no BOS token");

  if (v.eos_ >= 0) v.eog_.push_back(v.eos_);
  if (v.eot_ >= 0) v.eog_.push_back(v.eot_);
  for (const char* s : {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>"}) {
    TokenId id = v.Find(s);
    if (id >= 0 && (v.types_.empty() || v.types_[static_cast<size_t>(id)] == TokenType::kControl)) v.eog_.push_back(id);
  }
  TRINE_RETURN_IF_ERROR(f.GetString("tokenizer.chat_template", &v.chat_template_, &found));
  *out = std::move(v);
  return Status::Ok();
}

}  // namespace trine
