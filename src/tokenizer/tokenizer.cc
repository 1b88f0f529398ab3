// Tokenizer: special-token partitioning, the SPM/BPE drivers, pieces and detokenization.
#include "tokenizer/tokenizer.h"

#include <cstdio>
#include <utility>

#include "tokenizer/pretokenize.h"
#include "tokenizer/tokenizer_internal.h"
#include "tokenizer/unicode.h"

namespace trine {
namespace {

constexpr char kSpmSpace[] = "\xe2\x96\x81";  // U+2581, SentencePiece's visible space

// A stretch of the input: raw text [offset, offset + length) when token < 0, else a token.
struct Fragment {
  TokenId token;
  size_t offset;
  size_t length;
};

// Cuts the special-token texts out of the raw fragments, longest token first (llama.cpp's
// tokenizer_st_partition). Control and unknown tokens take part only with parse_special.
void Partition(const Vocab& vocab, const std::string& text, bool parse_special, std::vector<Fragment>* frags) {
  // Which bytes and adjacent byte pairs occur in the text: most special tokens (thousands of
  // user-defined ones in some vocabularies) are ruled out without scanning the text for them.
  std::vector<uint64_t> pairs(65536 / 64, 0);
  uint64_t bytes[4] = {0, 0, 0, 0};
  for (size_t i = 0; i < text.size(); ++i) {
    const auto b = static_cast<uint8_t>(text[i]);
    bytes[b >> 6] |= uint64_t{1} << (b & 63);
    if (i + 1 < text.size()) {
      const unsigned p = unsigned{b} << 8 | static_cast<uint8_t>(text[i + 1]);
      pairs[p >> 6] |= uint64_t{1} << (p & 63);
    }
  }
  const auto may_occur = [&](const std::string& s) {
    if (s.size() > text.size()) return false;
    const auto b0 = static_cast<uint8_t>(s[0]);
    if (s.size() == 1) return ((bytes[b0 >> 6] >> (b0 & 63)) & 1) != 0;
    const unsigned p = unsigned{b0} << 8 | static_cast<uint8_t>(s[1]);
    return ((pairs[p >> 6] >> (p & 63)) & 1) != 0;
  };

  std::vector<Fragment> next;
  for (const TokenId id : vocab.special_tokens()) {
    if (!parse_special && (vocab.attr(id) & (kAttrControl | kAttrUnknown))) continue;
    const std::string& needle = vocab.token(id);
    if (!may_occur(needle)) continue;
    bool found_any = false;
    next.clear();
    for (const Fragment& f : *frags) {
      if (f.token >= 0) {
        next.push_back(f);
        continue;
      }
      const size_t end = f.offset + f.length;
      size_t pos = f.offset;
      while (pos < end) {
        const size_t hit = text.find(needle, pos);
        if (hit == std::string::npos || hit + needle.size() > end) break;
        if (hit > pos) next.push_back(Fragment{-1, pos, hit - pos});
        next.push_back(Fragment{id, hit, needle.size()});
        pos = hit + needle.size();
        found_any = true;
      }
      if (pos < end) next.push_back(Fragment{-1, pos, end - pos});
    }
    if (found_any) frags->swap(next);
  }
}

void ReplaceAll(std::string* s, std::string_view from, std::string_view to) {
  std::string out;
  out.reserve(s->size());
  size_t pos = 0;
  for (size_t hit; (hit = s->find(from.data(), pos, from.size())) != std::string::npos; pos = hit + from.size()) {
    out.append(*s, pos, hit - pos).append(to);
  }
  out.append(*s, pos, std::string::npos);
  s->swap(out);
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// The byte of a "<0xXX>" token (0 when the text is not of that form).
char ByteOfToken(const std::string& t) {
  if (t.size() < 5) return 0;
  const int hi = HexValue(t[3]), lo = HexValue(t[4]);
  if (hi < 0) return 0;
  return static_cast<char>(lo < 0 ? hi : hi * 16 + lo);
}

// BPE token text back to bytes through the inverse GPT-2 byte map. A code point outside the map
// is written as "[UNK_BYTE_0x<its utf-8 hex><token text>]", as llama.cpp does.
std::string DecodeBpeText(const std::string& t) {
  std::vector<uint32_t> cpts;
  unicode::DecodeLenient(t, &cpts);
  std::string out;
  out.reserve(t.size());
  for (uint32_t c : cpts) {
    const int b = unicode::UnicodeToByte(c);
    if (b >= 0) {
      out.push_back(static_cast<char>(b));
      continue;
    }
    std::string utf8;
    unicode::AppendUtf8(c, &utf8);
    out += "[UNK_BYTE_0x";
    for (char ch : utf8) {
      char hex[3];
      std::snprintf(hex, sizeof(hex), "%02x", static_cast<unsigned>(static_cast<uint8_t>(ch)));
      out += hex;
    }
    out += t;
    out += "]";
  }
  return out;
}

// llama.cpp's clean_up_tokenization_spaces, in three passes over the detokenized text.
std::string CleanSpaces(const std::string& text) {
  if (text.size() < 2) return text;
  // 1: " ?", " !", " .", " ," lose the space.
  std::string a(1, text[0]);
  for (size_t i = 1; i < text.size(); ++i) {
    const char x = text[i];
    if (text[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',')) a.pop_back();
    a.push_back(x);
  }
  if (a.size() < 2) return a;
  // 2: a lone apostrophe between spaces loses both spaces. The space after it is consumed, so it
  // no longer counts as the space before the next character.
  std::string in = a;
  std::string b(1, in[0]);
  for (size_t i = 1; i < in.size(); ++i) {
    const char x = in[i];
    if (x == '\'' && i + 1 < in.size() && in[i - 1] == ' ' && in[i + 1] == ' ') {
      b.pop_back();
      in[++i] = '\0';
    }
    b.push_back(x);
  }
  if (b.size() < 2) return b;
  // 3: " 's", " 'm", " 're", " 've" lose the space (" 't", " 'd", " 'll" keep it).
  std::string c(1, b[0]);
  for (size_t i = 1; i < b.size(); ++i) {
    const char x = b[i];
    if (b[i - 1] == ' ' && x == '\'' && i + 1 < b.size()) {
      const char x1 = b[i + 1];
      if (x1 == 's' || x1 == 'm') {
        c.pop_back();
      } else if (x1 != 't' && x1 != 'd' && i + 2 < b.size()) {
        const char x2 = b[i + 2];
        if ((x1 == 'r' && x2 == 'e') || (x1 == 'v' && x2 == 'e')) c.pop_back();
      }
    }
    c.push_back(x);
  }
  return c;
}

}  // namespace

Tokenizer::Tokenizer(std::shared_ptr<const Vocab> vocab) : vocab_(std::move(vocab)) {}
Tokenizer::~Tokenizer() = default;

Status Tokenizer::Create(std::shared_ptr<const Vocab> vocab, std::unique_ptr<Tokenizer>* out) {
  if (vocab == nullptr) return InvalidArgument("no vocabulary given");
  std::unique_ptr<Tokenizer> t(new Tokenizer(std::move(vocab)));
  if (t->vocab_->kind() == VocabKind::kBpe) {
    if (t->vocab_->pre_kind() == PreTokenizerKind::kUnsupported) {
      return Unsupported("pre-tokenizer '" + t->vocab_->pre() +
                         "' (tokenizer.ggml.pre) is not supported; known: default, gpt-2, llama3/llama-bpe, "
                         "dbrx, smaug-bpe, deepseek-llm, deepseek-coder, falcon, mpt, starcoder, refact, qwen2, "
                         "stablelm2, olmo, bloom and others of these families");
    }
    TRINE_RETURN_IF_ERROR(PreTokenizer::Create(PreTokenizer::Patterns(t->vocab_->pre_kind()), &t->pre_));
  }
  *out = std::move(t);
  return Status::Ok();
}

Status Tokenizer::FromGguf(const GgufFile& file, std::unique_ptr<Tokenizer>* out) {
  Vocab vocab;
  TRINE_RETURN_IF_ERROR(LoadVocab(file, &vocab));
  Status st = Create(std::make_shared<const Vocab>(std::move(vocab)), out);
  if (!st.ok()) return Status(st.code(), file.path() + ": " + st.message());
  return st;
}

Status Tokenizer::Tokenize(const std::string& text, bool add_special, bool parse_special,
                           std::vector<TokenId>* out) const {
  out->clear();
  std::vector<Fragment> frags;
  if (!text.empty()) {
    frags.push_back(Fragment{-1, 0, text.size()});
    Partition(*vocab_, text, parse_special, &frags);
  }
  if (add_special && vocab_->add_bos()) out->push_back(vocab_->bos());

  if (vocab_->kind() == VocabKind::kSpm) {
    bool after_special = true;  // the first fragment gets the space prefix too
    std::string piece;
    for (const Fragment& f : frags) {
      if (f.token >= 0) {
        out->push_back(f.token);
        after_special = true;
        continue;
      }
      piece.clear();
      if (vocab_->add_space_prefix() && after_special) piece = " ";
      piece.append(text, f.offset, f.length);
      ReplaceAll(&piece, " ", kSpmSpace);
      TRINE_RETURN_IF_ERROR(internal::SpmEncode(*vocab_, piece, out));
      after_special = false;
    }
  } else {
    std::vector<std::string> words;
    for (const Fragment& f : frags) {
      if (f.token >= 0) {
        out->push_back(f.token);
        continue;
      }
      words.clear();
      TRINE_RETURN_IF_ERROR(pre_->Split(std::string_view(text).substr(f.offset, f.length), &words));
      for (const std::string& w : words) internal::BpeEncodeWord(*vocab_, w, vocab_->ignore_merges(), out);
    }
  }

  if (add_special && vocab_->add_eos()) out->push_back(vocab_->eos());
  return Status::Ok();
}

std::string Tokenizer::TokenToPiece(TokenId id, bool render_special) const {
  if (!vocab_->InRange(id)) return std::string();
  const uint16_t attr = vocab_->attr(id);
  if (!render_special && (attr & (kAttrControl | kAttrUnknown))) return std::string();
  const std::string& text = vocab_->token(id);
  if (attr & (kAttrControl | kAttrUnknown | kAttrUserDefined)) return text;
  if (attr & kAttrNormal) {
    if (vocab_->kind() == VocabKind::kBpe) return DecodeBpeText(text);
    std::string s = text;
    ReplaceAll(&s, kSpmSpace, " ");
    return s;
  }
  if (attr & kAttrByte) return std::string(1, ByteOfToken(text));
  return std::string();  // unused and undefined tokens have no text
}

Status Tokenizer::Detokenize(const std::vector<TokenId>& ids, std::string* out, bool remove_special,
                             bool render_special) const {
  out->clear();
  for (size_t i = 0; i < ids.size(); ++i) {
    if (!vocab_->InRange(ids[i])) {
      return InvalidArgument("token id " + std::to_string(ids[i]) + " at position " + std::to_string(i) +
                             " is out of range (vocabulary has " + std::to_string(vocab_->size()) + " tokens)");
    }
  }
  size_t begin = 0, end = ids.size();
  bool strip_space = vocab_->add_space_prefix();
  if (remove_special && vocab_->add_bos() && end > begin && ids[begin] == vocab_->bos()) {
    strip_space = false;  // llama.cpp keeps the space when it drops the BOS
    ++begin;
  }
  if (remove_special && vocab_->add_eos() && end > begin && ids[end - 1] == vocab_->eos()) --end;
  for (size_t i = begin; i < end; ++i) {
    std::string piece = TokenToPiece(ids[i], render_special);
    if (strip_space && !piece.empty() && piece[0] == ' ') piece.erase(0, 1);
    strip_space = false;
    out->append(piece);
  }
  if (vocab_->clean_spaces()) *out = CleanSpaces(*out);
  return Status::Ok();
}

}  // namespace trine
