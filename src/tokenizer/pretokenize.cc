// BPE pre-tokenizer over PCRE2 (see pretokenize.h for the exact semantics).
#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer/pretokenize.h"

#include <pcre2.h>

#include <utility>

#include "tokenizer/unicode.h"

namespace trine {
namespace {

// The regexes are the ones llama.cpp's llama-vocab.cpp lists per pre-tokenizer type (they come
// from each model's tokenizer.json); PCRE2 reads them as they are.
const char kGpt2[] = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))";
const char kLlama3[] =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char kQwen2[] =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char kCjk[] = R"([\x{4E00}-\x{9FA5}\x{800}-\x{4E00}\x{AC00}-\x{D7FF}]+)";
// deepseek-llm's letter class: the cased letters of many scripts, spelled out as ranges.
const char kDeepseekLetters[] =
    R"(\s?[A-Za-z\x{B5}\x{C0}-\x{D6}\x{D8}-\x{F6}\x{F8}-\x{1BA}\x{1BC}-\x{1BF}\x{1C4}-\x{293}\x{295}-\x{2AF})"
    R"(\x{370}-\x{373}\x{376}\x{377}\x{37B}-\x{37D}\x{37F}\x{386}\x{388}-\x{38A}\x{38C}\x{38E}-\x{3A1})"
    R"(\x{3A3}-\x{3F5}\x{3F7}-\x{481}\x{48A}-\x{52F}\x{531}-\x{556}\x{10A0}-\x{10C5}\x{13A0}-\x{13F5})"
    R"(\x{13F8}-\x{13FD}\x{1C90}-\x{1CBA}\x{1CBD}-\x{1CBF}\x{1D00}-\x{1D2B}\x{1D6B}-\x{1D77}\x{1D79}-\x{1D9A})"
    R"(\x{1E00}-\x{1F15}\x{1F18}-\x{1F1D}\x{1F20}-\x{1F45}\x{1F48}-\x{1F4D}\x{1F50}-\x{1F57}\x{1F59}\x{1F5B})"
    R"(\x{1F5D}\x{1F5F}-\x{1F7D}\x{1F80}-\x{1FB4}\x{1FB6}-\x{1FBC}\x{1FBE}\x{1FC2}-\x{1FC4}\x{1FC6}-\x{1FCC})"
    R"(\x{1FD0}-\x{1FD3}\x{1FD6}-\x{1FDB}\x{1FE0}-\x{1FEC}\x{1FF2}-\x{1FF4}\x{1FF6}-\x{1FFC}\x{2102}\x{2107})"
    R"(\x{210A}-\x{2113}\x{2115}\x{2119}-\x{211D}\x{2124}\x{2126}\x{2128}\x{212A}-\x{212D}\x{212F}-\x{2134})"
    R"(\x{2139}\x{213C}-\x{213F}\x{2145}-\x{2149}\x{214E}\x{2183}\x{2184}\x{2C00}-\x{2C7B}\x{2C7E}-\x{2CE4})"
    R"(\x{2CEB}-\x{2CEE}\x{2CF2}\x{2CF3}\x{A640}-\x{A66D}\x{A680}-\x{A69B}\x{A722}-\x{A76F}\x{A771}-\x{A787})"
    R"(\x{A78B}-\x{A78E}\x{AB70}-\x{ABBF}\x{FB00}-\x{FB06}\x{FB13}-\x{FB17}\x{FF21}-\x{FF3A}\x{FF41}-\x{FF5A})"
    R"(\x{10400}-\x{1044F}\x{104B0}-\x{104D3}\x{104D8}-\x{104FB}\x{10C80}-\x{10CB2}\x{10CC0}-\x{10CF2})"
    R"(\x{118A0}-\x{118DF}\x{1E900}-\x{1E943}]+)";
const char kDeepseekPunct[] = R"(\s?[!-/:-~\x{FF01}-\x{FF0F}\x{FF1A}-\x{FF5E}\x{2018}-\x{201F}\x{3000}-\x{3002}]+)";
const char kBloom[] = R"( ?[^(\s|.,!?\x{2026}\x{3002}\x{FF0C}\x{3001}\x{964}\x{6D4}\x{60C})]+)";

// Code point as the regexes see it: non-ASCII White_Space becomes U+000B (so the ASCII-only \s
// matches it, as in llama.cpp), and values PCRE2 cannot take (surrogates, > U+10FFFF, which only
// lenient decoding of bad input yields) become U+FFFD, which no class used here tells apart.
uint32_t MatchCodePoint(uint32_t c) {
  if (c >= 0x80 && unicode::IsWhitespace(c)) return 0x0B;
  if ((c >= 0xD800 && c <= 0xDFFF) || c > 0x10FFFF) return unicode::kReplacementChar;
  return c;
}

struct MatchDataDeleter {
  void operator()(pcre2_match_data* md) const { pcre2_match_data_free(md); }
};

}  // namespace

struct PreTokenizer::Compiled {
  pcre2_code* code = nullptr;
  ~Compiled() {
    if (code) pcre2_code_free(code);
  }
};

PreTokenizer::~PreTokenizer() = default;

std::vector<std::string> PreTokenizer::Patterns(PreTokenizerKind kind) {
  switch (kind) {
    case PreTokenizerKind::kDefault:
      return {R"([\p{P}\$\+<=>\^~\|]+)", kGpt2, R"(\p{N}+)", "[0-9][0-9][0-9]"};
    case PreTokenizerKind::kGpt2:
      return {kGpt2};
    case PreTokenizerKind::kLlama3:
      return {kLlama3};
    case PreTokenizerKind::kQwen2:
      return {kQwen2};
    case PreTokenizerKind::kDeepseekLlm:
      return {R"([\r\n])", kDeepseekLetters, kDeepseekPunct, R"(\s+$)", kCjk, R"(\p{N}+)"};
    case PreTokenizerKind::kDeepseekCoder:
      return {R"([\r\n])", R"(\s?\p{L}+)", R"(\s?\p{P}+)", kCjk, R"(\p{N})"};
    case PreTokenizerKind::kFalcon:
      return {R"([\p{P}\$\+<=>\^~\|`]+)", kGpt2, "[0-9][0-9][0-9]"};
    case PreTokenizerKind::kStarcoder:
      return {R"(\p{N})", kGpt2};
    case PreTokenizerKind::kBloom:
      return {kBloom};
    case PreTokenizerKind::kNone:
    case PreTokenizerKind::kUnsupported:
      break;
  }
  return {};
}

Status PreTokenizer::Create(const std::vector<std::string>& patterns, std::unique_ptr<PreTokenizer>* out) {
  std::unique_ptr<PreTokenizer> pt(new PreTokenizer());
  for (const std::string& p : patterns) {
    int err = 0;
    PCRE2_SIZE err_off = 0;
    auto c = std::make_unique<Compiled>();
    // UTF, no UCP: \s \d \w stay ASCII like std::regex in the C locale; $ only at the very end.
    c->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(p.data()), p.size(), PCRE2_UTF | PCRE2_DOLLAR_ENDONLY,
                            &err, &err_off, nullptr);
    if (!c->code) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(err, msg, sizeof(msg));
      return Status(StatusCode::kInternal, "pre-tokenizer regex does not compile at offset " +
                                               std::to_string(err_off) + ": " + reinterpret_cast<char*>(msg));
    }
    pcre2_jit_compile(c->code, PCRE2_JIT_COMPLETE);  // optional: the interpreter is the fallback
    pt->regexes_.push_back(std::move(c));
  }
  *out = std::move(pt);
  return Status::Ok();
}

Status PreTokenizer::Split(std::string_view text, std::vector<std::string>* words) const {
  std::vector<uint32_t> cpts;
  cpts.reserve(text.size());
  unicode::DecodeLenient(text, &cpts);
  const size_t n = cpts.size();
  if (n == 0) return Status::Ok();

  // subject: UTF-8 of the match code points; start[i]: byte offset of code point i (start[n] =
  // size); index_at[b]: code point index starting at byte b.
  std::string subject;
  subject.reserve(text.size() + 8);
  std::vector<size_t> start(n + 1);
  for (size_t i = 0; i < n; ++i) {
    start[i] = subject.size();
    unicode::AppendUtf8(MatchCodePoint(cpts[i]), &subject);
  }
  start[n] = subject.size();
  std::vector<uint32_t> index_at(subject.size() + 1, 0);
  for (size_t i = 0; i <= n; ++i) index_at[start[i]] = static_cast<uint32_t>(i);

  // Pieces as code point ranges [first, second).
  std::vector<std::pair<size_t, size_t>> pieces{{0, n}}, next;
  std::unique_ptr<pcre2_match_data, MatchDataDeleter> md(pcre2_match_data_create(1, nullptr));
  if (!md) return Status(StatusCode::kOutOfMemory, "pre-tokenizer: out of memory");

  for (const auto& re : regexes_) {
    next.clear();
    for (const auto& [first, last] : pieces) {
      const size_t base = start[first];
      const auto subj = reinterpret_cast<PCRE2_SPTR>(subject.data() + base);
      const size_t len = start[last] - base;
      const auto emit = [&](size_t b, size_t e) {  // byte offsets within the piece
        if (e > b) next.emplace_back(index_at[base + b], index_at[base + e]);
      };
      size_t pos = 0;       // where the next search starts
      size_t emitted = 0;   // end of the text already emitted
      uint32_t retry = 0;   // options after an empty match: a non-empty match at the same place
      while (pos <= len) {
        uint32_t opts = PCRE2_NO_UTF_CHECK | retry;
        int rc = pcre2_match(re->code, subj, len, pos, opts, md.get(), nullptr);
        if (rc == PCRE2_ERROR_JIT_STACKLIMIT) {
          rc = pcre2_match(re->code, subj, len, pos, opts | PCRE2_NO_JIT, md.get(), nullptr);
        }
        if (rc == PCRE2_ERROR_NOMATCH) {
          if (!retry || pos >= len) break;
          retry = 0;  // no non-empty match here: move on by one character
          pos += unicode::SeqLen(static_cast<uint8_t>(subj[pos]));
          continue;
        }
        if (rc < 0) {
          PCRE2_UCHAR msg[256];
          pcre2_get_error_message(rc, msg, sizeof(msg));
          return Status(StatusCode::kInternal,
                        std::string("pre-tokenizer regex failed: ") + reinterpret_cast<char*>(msg));
        }
        const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md.get());
        const size_t mb = ov[0], me = ov[1];
        emit(emitted, mb);  // the text before the match is a piece of its own
        emitted = mb;
        if (me == mb) {  // empty match: nothing to emit; look for a non-empty one here
          retry = PCRE2_NOTEMPTY_ATSTART | PCRE2_ANCHORED;
          pos = mb;
          continue;
        }
        emit(mb, me);
        emitted = me;
        pos = me;
        retry = 0;
      }
      emit(emitted, len);
    }
    pieces.swap(next);
  }

  for (const auto& [first, last] : pieces) {
    std::string w;
    for (size_t i = first; i < last; ++i) unicode::AppendUtf8(cpts[i], &w);
    words->push_back(std::move(w));
  }
  return Status::Ok();
}

}  // namespace trine
