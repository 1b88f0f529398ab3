// Vocabulary loading and validation from tokenizer.ggml.* metadata, plus the lookup tables the
// tokenizers use on every call.
#include "tokenizer/vocab.h"

#include <algorithm>
#include <cstring>
#include <functional>

#include "tokenizer/unicode.h"

namespace trine {
namespace {

constexpr uint64_t kEmptyMergeKey = ~uint64_t{0};

// Open-addressing capacity for n keys: a power of two at most 60 % full (linear probing stays at
// ~1.5 probes a hit, ~3 a miss). Llama 3's 280k merges take 8 MiB of slots this way; at most
// 50 % full they took 16 MiB, resident for the life of the model.
size_t TableSizeFor(size_t n) {
  size_t cap = 16;
  while (cap * 3 < n * 5) cap <<= 1;
  return cap;
}

size_t HashText(std::string_view s) { return std::hash<std::string_view>{}(s); }

uint64_t MixKey(uint64_t x) {  // splitmix64 finaliser
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

uint64_t PairKey(TokenId l, TokenId r) {
  return static_cast<uint64_t>(static_cast<uint32_t>(l)) << 32 | static_cast<uint32_t>(r);
}

// How llama.cpp's llama-vocab.cpp treats each tokenizer.ggml.pre name (for the regex families
// trine implements): the pre-tokenizer, whether a pre-token that is already a token skips the
// merges, whether detokenize cleans spaces, and whether BOS is added by default.
struct PreSpec {
  const char* name;
  PreTokenizerKind kind;
  bool ignore_merges;
  bool clean_spaces;
  bool add_bos;
};

constexpr PreSpec kPreSpecs[] = {
    {"default", PreTokenizerKind::kDefault, false, true, false},
    {"llama3", PreTokenizerKind::kLlama3, true, true, true},
    {"llama-v3", PreTokenizerKind::kLlama3, true, true, true},
    {"llama-bpe", PreTokenizerKind::kLlama3, true, true, true},
    {"falcon3", PreTokenizerKind::kLlama3, true, true, true},
    {"falcon-h1", PreTokenizerKind::kLlama3, true, true, true},
    {"pixtral", PreTokenizerKind::kLlama3, true, true, true},
    {"midm-2.0", PreTokenizerKind::kLlama3, true, true, true},
    {"lfm2", PreTokenizerKind::kLlama3, true, true, true},
    {"jina-v5-nano", PreTokenizerKind::kLlama3, true, true, true},
    {"dbrx", PreTokenizerKind::kLlama3, false, true, false},
    {"smaug-bpe", PreTokenizerKind::kLlama3, false, true, false},
    {"deepseek-llm", PreTokenizerKind::kDeepseekLlm, false, false, false},
    {"deepseek-coder", PreTokenizerKind::kDeepseekCoder, false, false, false},
    {"falcon", PreTokenizerKind::kFalcon, false, true, false},
    {"mpt", PreTokenizerKind::kGpt2, false, true, false},
    {"olmo", PreTokenizerKind::kGpt2, false, true, false},
    {"jais", PreTokenizerKind::kGpt2, false, true, false},
    {"gpt-2", PreTokenizerKind::kGpt2, false, true, false},
    {"phi-2", PreTokenizerKind::kGpt2, false, true, false},
    {"jina-es", PreTokenizerKind::kGpt2, false, true, false},
    {"jina-de", PreTokenizerKind::kGpt2, false, true, false},
    {"gigachat", PreTokenizerKind::kGpt2, false, true, false},
    {"jina-v2-es", PreTokenizerKind::kGpt2, false, true, false},
    {"jina-v2-de", PreTokenizerKind::kGpt2, false, true, false},
    {"a.x-4.0", PreTokenizerKind::kGpt2, false, true, false},
    {"mellum", PreTokenizerKind::kGpt2, false, true, false},
    {"modern-bert", PreTokenizerKind::kGpt2, false, true, false},
    {"exaone4", PreTokenizerKind::kGpt2, false, true, false},
    {"starcoder", PreTokenizerKind::kStarcoder, false, true, false},
    {"refact", PreTokenizerKind::kStarcoder, false, true, false},
    {"command-r", PreTokenizerKind::kStarcoder, false, false, false},
    {"smollm", PreTokenizerKind::kStarcoder, false, false, false},
    {"codeshell", PreTokenizerKind::kStarcoder, false, true, false},
    {"exaone", PreTokenizerKind::kStarcoder, false, true, false},
    {"minerva-7b", PreTokenizerKind::kStarcoder, false, true, false},
    {"qwen2", PreTokenizerKind::kQwen2, false, false, false},
    {"deepseek-r1-qwen", PreTokenizerKind::kQwen2, false, false, false},
    {"kormo", PreTokenizerKind::kQwen2, false, false, false},
    {"f2llmv2", PreTokenizerKind::kQwen2, false, false, false},
    {"stablelm2", PreTokenizerKind::kQwen2, false, true, false},
    {"megrez", PreTokenizerKind::kQwen2, false, true, false},
    {"poro-chat", PreTokenizerKind::kBloom, false, false, false},
    {"bloom", PreTokenizerKind::kBloom, false, true, false},
    {"gpt3-finnish", PreTokenizerKind::kBloom, false, true, false},
};

// Token texts llama.cpp recognises by name (its converters do not always set the ids or types).
const char* const kEotNames[] = {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
                                 "<|end_of_text|>", "<EOT>", "_<EOT>", "[EOT]",
                                 ("<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>"),
                                 "<end_of_utterance>"};
const char* const kEomNames[] = {"<|eom_id|>"};
const char* const kFimPreNames[] = {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>",
                                    ("<\xef\xbd\x9c" "fim\xe2\x96\x81" "begin\xef\xbd\x9c>"), "<PRE>",
                                    "\xe2\x96\x81<PRE>", "<|code_prefix|>", "<|prefix|>"};
const char* const kFimSufNames[] = {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>",
                                    ("<\xef\xbd\x9c" "fim\xe2\x96\x81hole\xef\xbd\x9c>"), "<SUF>",
                                    "\xe2\x96\x81<SUF>", "<|code_suffix|>", "<|suffix|>"};
const char* const kFimMidNames[] = {"<|fim_middle|>", "<fim-middle>", "<fim_middle>",
                                    ("<\xef\xbd\x9c" "fim\xe2\x96\x81" "end\xef\xbd\x9c>"), "<MID>",
                                    "\xe2\x96\x81<MID>", "<|code_middle|>", "<|middle|>"};
const char* const kFimPadNames[] = {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"};
const char* const kFimRepNames[] = {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"};
const char* const kFimSepNames[] = {"<|file_sep|>"};
const char* const kEogNames[] = {"<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>",
                                 "<|calls|>", "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>",
                                 "_<EOT>", "[EOT]", "[EOS]", "<|end_of_text|>", "<end_of_utterance>", "<eos>",
                                 "<turn|>", "<|tool_response>",
                                 ("<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>"), "[e~["};
// Always rendered as text (gpt-oss).
const char* const kRenderedNames[] = {"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"};

}  // namespace

const char* PreTokenizerKindName(PreTokenizerKind kind) {
  switch (kind) {
    case PreTokenizerKind::kNone: return "none (spm)";
    case PreTokenizerKind::kDefault: return "default";
    case PreTokenizerKind::kGpt2: return "gpt-2";
    case PreTokenizerKind::kLlama3: return "llama3";
    case PreTokenizerKind::kQwen2: return "qwen2";
    case PreTokenizerKind::kDeepseekLlm: return "deepseek-llm";
    case PreTokenizerKind::kDeepseekCoder: return "deepseek-coder";
    case PreTokenizerKind::kFalcon: return "falcon";
    case PreTokenizerKind::kStarcoder: return "starcoder";
    case PreTokenizerKind::kBloom: return "bloom";
    case PreTokenizerKind::kUnsupported: return "unsupported";
  }
  return "?";
}

TokenId Vocab::Find(std::string_view text) const {
  if (index_slots_.empty()) return -1;
  const size_t mask = index_slots_.size() - 1;
  for (size_t i = HashText(text) & mask;; i = (i + 1) & mask) {
    const TokenId id = index_slots_[i];
    if (id < 0) return -1;
    if (tokens_[static_cast<size_t>(id)] == text) return id;
  }
}

void Vocab::BuildIndex() {
  index_slots_.assign(TableSizeFor(tokens_.size()), -1);
  const size_t mask = index_slots_.size() - 1;
  for (size_t id = 0; id < tokens_.size(); ++id) {
    const std::string& t = tokens_[id];
    for (size_t i = HashText(t) & mask;; i = (i + 1) & mask) {
      const TokenId other = index_slots_[i];
      if (other < 0) {
        index_slots_[i] = static_cast<TokenId>(id);
        break;
      }
      if (tokens_[static_cast<size_t>(other)] == t) break;  // duplicate text: the first id wins
    }
  }
}

int Vocab::MergeRank(TokenId left, TokenId right, TokenId* merged) const {
  *merged = -1;
  if (merge_slots_.empty() || left < 0 || right < 0) return -1;
  const uint64_t key = PairKey(left, right);
  const size_t mask = merge_slots_.size() - 1;
  for (size_t i = MixKey(key) & mask;; i = (i + 1) & mask) {
    const MergeSlot& s = merge_slots_[i];
    if (s.key == kEmptyMergeKey) return -1;
    if (s.key == key) {
      *merged = s.merged;
      return s.rank;
    }
  }
}

int Vocab::MergeRank(std::string_view left, std::string_view right) const {
  const TokenId l = Find(left), r = Find(right);
  if (l >= 0 && r >= 0) {
    TokenId merged;
    return MergeRank(l, r, &merged);
  }
  if (text_merges_.empty()) return -1;
  std::string key;
  key.reserve(left.size() + right.size() + 1);
  key.append(left).append(1, ' ').append(right);
  auto it = text_merges_.find(key);
  return it == text_merges_.end() ? -1 : it->second;
}

Status Vocab::BuildMerges(const std::vector<std::string>& merges, const std::string& path) {
  merge_slots_.assign(TableSizeFor(merges.size()), MergeSlot{kEmptyMergeKey, -1, -1});
  const size_t mask = merge_slots_.size() - 1;
  std::string joined;
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const std::string& m = merges[rank];
    const size_t sp = m.find(' ', 1);
    if (sp == std::string::npos || sp + 1 >= m.size()) {
      return InvalidFile(path + ": tokenizer.ggml.merges[" + std::to_string(rank) + "] is not 'left right'");
    }
    const std::string_view left(m.data(), sp), right(m.data() + sp + 1, m.size() - sp - 1);
    const TokenId l = Find(left), r = Find(right);
    if (l < 0 || r < 0) {
      text_merges_.emplace(m, static_cast<int>(rank));  // first occurrence wins, as in llama.cpp
      continue;
    }
    joined.assign(left).append(right);
    const uint64_t key = PairKey(l, r);
    for (size_t i = MixKey(key) & mask;; i = (i + 1) & mask) {
      MergeSlot& s = merge_slots_[i];
      if (s.key == key) break;
      if (s.key == kEmptyMergeKey) {
        s = MergeSlot{key, static_cast<int32_t>(rank), Find(joined)};
        break;
      }
    }
  }
  return Status::Ok();
}

bool Vocab::IsEog(TokenId id) const {
  return id >= 0 && std::find(eog_.begin(), eog_.end(), id) != eog_.end();
}

// Per-token attributes from the token types, then llama.cpp's name-based fix-ups, the special
// token list and the byte fallback table.
void Vocab::BuildAttributes() {
  const size_t n = tokens_.size();
  attrs_.assign(n, kAttrNormal);
  for (size_t i = 0; i < types_.size(); ++i) {
    switch (types_[i]) {
      case TokenType::kUndefined: attrs_[i] = 0; break;
      case TokenType::kNormal: attrs_[i] = kAttrNormal; break;
      case TokenType::kUnknown: attrs_[i] = kAttrUnknown; break;
      case TokenType::kControl: attrs_[i] = kAttrControl; break;
      case TokenType::kUserDefined: attrs_[i] = kAttrUserDefined; break;
      case TokenType::kUnused: attrs_[i] = kAttrUnused; break;
      case TokenType::kByte: attrs_[i] = kAttrByte; break;
    }
  }
  const auto mark_control = [&](TokenId id) { attrs_[static_cast<size_t>(id)] |= kAttrControl; };
  // Finds the first of `names` present; when `*id` is unset it becomes that token (marked control).
  const auto detect = [&](const auto& names, TokenId* id) {
    if (*id >= 0) return;
    for (const char* name : names) {
      const TokenId t = Find(name);
      if (t >= 0) {
        *id = t;
        mark_control(t);
        return;
      }
    }
  };
  TokenId fim_pre = -1, fim_suf = -1, fim_mid = -1, fim_pad = -1, fim_rep = -1, fim_sep = -1;
  detect(kEotNames, &eot_);
  detect(kEomNames, &eom_);
  detect(kFimPreNames, &fim_pre);
  detect(kFimSufNames, &fim_suf);
  detect(kFimMidNames, &fim_mid);
  detect(kFimPadNames, &fim_pad);
  detect(kFimRepNames, &fim_rep);
  detect(kFimSepNames, &fim_sep);

  for (size_t i = 0; i < n; ++i) {
    if ((attrs_[i] & kAttrControl) && tokens_[i].find("unused") != std::string::npos) attrs_[i] |= kAttrUnused;
  }

  eog_.clear();
  const auto add_eog = [&](TokenId id) {
    if (id >= 0 && std::find(eog_.begin(), eog_.end(), id) == eog_.end()) eog_.push_back(id);
  };
  add_eog(fim_pad);
  add_eog(fim_rep);
  add_eog(fim_sep);
  for (const char* name : kEogNames) {
    const TokenId t = Find(name);
    if (t >= 0) {
      add_eog(t);
      mark_control(t);
    }
  }
  for (const char* name : kRenderedNames) {
    const TokenId t = Find(name);
    if (t >= 0) attrs_[static_cast<size_t>(t)] = kAttrUserDefined;
  }
  add_eog(eos_);
  add_eog(eot_);
  add_eog(eom_);

  special_tokens_.clear();
  for (size_t i = 0; i < n; ++i) {
    if (attrs_[i] & (kAttrControl | kAttrUserDefined | kAttrUnknown)) special_tokens_.push_back(static_cast<TokenId>(i));
  }
  std::stable_sort(special_tokens_.begin(), special_tokens_.end(), [&](TokenId a, TokenId b) {
    return tokens_[static_cast<size_t>(a)].size() > tokens_[static_cast<size_t>(b)].size();
  });

  for (int b = 0; b < 256; ++b) {
    const uint8_t byte = static_cast<uint8_t>(b);
    TokenId id = -1;
    if (kind_ == VocabKind::kSpm) {
      static const char kHex[] = "0123456789ABCDEF";
      const char name[7] = {'<', '0', 'x', kHex[b >> 4], kHex[b & 15], '>', 0};
      id = Find(name);
      if (id < 0) id = Find(std::string_view(reinterpret_cast<const char*>(&byte), 1));
    } else {
      id = Find(unicode::ByteToUnicode(byte));
    }
    byte_tokens_[byte] = id;
  }
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
  for (uint64_t i = 0; i < n; ++i) {
    // llama.cpp renames empty tokens so that every text is unique and non-empty.
    if (v.tokens_[i].empty()) v.tokens_[i] = "[EMPTY_" + std::to_string(i) + "]";
  }

  if (const GgufValue* sc = f.Find("tokenizer.ggml.scores")) {
    if (!sc->is_array() || sc->elem_type() != GgufType::kF32 || sc->count() != n) {
      return InvalidFile(path + ": key 'tokenizer.ggml.scores' must be an f32 array of " + std::to_string(n) +
                         " entries");
    }
    v.scores_.resize(n);
    if (sc->raw().size() == n * sizeof(float)) {
      std::memcpy(v.scores_.data(), sc->raw().data(), n * sizeof(float));
    } else {
      for (uint64_t i = 0; i < n; ++i) {
        double d = 0;
        sc->DoubleAt(i, &d);
        v.scores_[i] = static_cast<float>(d);
      }
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

  v.BuildIndex();

  if (const GgufValue* mg = f.Find("tokenizer.ggml.merges")) {
    if (!mg->is_array() || mg->elem_type() != GgufType::kString) {
      return InvalidFile(path + ": key 'tokenizer.ggml.merges' must be an array of strings");
    }
    TRINE_RETURN_IF_ERROR(v.BuildMerges(mg->strings(), path));
  } else if (v.kind_ == VocabKind::kBpe) {
    return InvalidFile(path + ": missing required key 'tokenizer.ggml.merges' for a gpt2 tokenizer");
  }

  // Defaults follow llama.cpp: SPM has <unk>=0 <s>=1 </s>=2, adds BOS and a leading space; BPE
  // uses id 11 for BOS/EOS unless the file says otherwise, and its flags depend on the
  // pre-tokenizer name.
  if (v.kind_ == VocabKind::kSpm) {
    v.unk_ = 0;
    v.bos_ = n > 1 ? 1 : -1;
    v.eos_ = n > 2 ? 2 : -1;
    v.add_bos_ = true;
    v.add_space_prefix_ = true;
    v.clean_spaces_ = false;
    v.pre_kind_ = PreTokenizerKind::kNone;
  } else {
    v.bos_ = v.eos_ = n > 11 ? 11 : -1;
    v.add_bos_ = false;
    v.add_space_prefix_ = false;
    v.clean_spaces_ = true;
    v.pre_kind_ = PreTokenizerKind::kUnsupported;
    const std::string pre = v.pre_.empty() ? "default" : v.pre_;
    for (const PreSpec& s : kPreSpecs) {
      if (pre == s.name) {
        v.pre_kind_ = s.kind;
        v.ignore_merges_ = s.ignore_merges;
        v.clean_spaces_ = s.clean_spaces;
        v.add_bos_ = s.add_bos;
        break;
      }
    }
  }

  auto special = [&](const char* key, TokenId* id) -> Status {
    int64_t x = 0;
    bool has = false;
    TRINE_RETURN_IF_ERROR(f.GetInt(key, &x, &has));
    if (!has) return Status::Ok();
    if (x < 0 || static_cast<uint64_t>(x) >= n) {
      // Converters write -1 (as u32 0xFFFFFFFF) for "none"; llama.cpp then keeps the default.
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
  TRINE_RETURN_IF_ERROR(special("tokenizer.ggml.eom_token_id", &v.eom_));
  TRINE_RETURN_IF_ERROR(special("tokenizer.ggml.unknown_token_id", &v.unk_));
  TRINE_RETURN_IF_ERROR(special("tokenizer.ggml.padding_token_id", &v.pad_));

  bool b = false;
  TRINE_RETURN_IF_ERROR(f.GetBool("tokenizer.ggml.add_bos_token", &b, &found));
  if (found) v.add_bos_ = b;
  TRINE_RETURN_IF_ERROR(f.GetBool("tokenizer.ggml.add_eos_token", &b, &found));
  if (found) v.add_eos_ = b;
  TRINE_RETURN_IF_ERROR(f.GetBool("tokenizer.ggml.add_space_prefix", &b, &found));
  if (found) v.add_space_prefix_ = b;
  if (v.add_bos_ && v.bos_ < 0) return InvalidFile(path + ": add_bos_token is set but there is no BOS token");
  if (v.add_eos_ && v.eos_ < 0) return InvalidFile(path + ": add_eos_token is set but there is no EOS token");

  v.BuildAttributes();
  TRINE_RETURN_IF_ERROR(f.GetString("tokenizer.chat_template", &v.chat_template_, &found));
  *out = std::move(v);
  return Status::Ok();
}

}  // namespace trine
