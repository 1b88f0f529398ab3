// libFuzzer target for the tokenizers: arbitrary bytes through Tokenize and Detokenize on the
// four llama.cpp test vocabularies (SPM llama, BPE llama3 / gpt-2 / deepseek-llm) and through the
// C API's size-query protocol on the bundled model.
// Input: byte 0 picks the vocabulary and the flags, the rest is the text.
// Invariants: every id is in range; Detokenize of those ids succeeds; on deepseek-llm (byte-level
// BPE without clean-up of spaces) valid UTF-8 without special-token parsing comes back byte for
// byte; the C API reports -(needed) for a short buffer and then writes exactly `needed` items
// equal to the library's own result.
#include <memory>
#include <string>
#include <vector>

#include "fuzz_util.h"
#include "gguf/gguf_reader.h"
#include "tokenizer/tokenizer.h"
#include "trine/trine.h"

namespace {

using trine::fuzz::Check;

struct Vocabs {
  std::unique_ptr<trine::Tokenizer> tok[4];
  trine_model* model = nullptr;
};

const Vocabs& Shared() {
  static const Vocabs* v = [] {
    auto* out = new Vocabs;
    const char* files[4] = {"vocab/ggml-vocab-llama-spm.gguf", "vocab/ggml-vocab-llama-bpe.gguf",
                            "vocab/ggml-vocab-gpt-2.gguf", "vocab/ggml-vocab-deepseek-llm.gguf"};
    for (int i = 0; i < 4; ++i) {
      std::unique_ptr<trine::GgufFile> g;
      Check(trine::GgufFile::Open(trine::fuzz::ModelPath(files[i]), {}, &g).ok(), "vocab file opens");
      Check(trine::Tokenizer::FromGguf(*g, &out->tok[i]).ok(), "vocab loads");
    }
    trine_model_params mp = trine_model_default_params();
    out->model = trine_model_load(trine::fuzz::ModelPath("bitnet-tiny-stories-TQ2_0-f16emb.gguf").c_str(), &mp);
    Check(out->model != nullptr, "bundled model loads");
    return out;
  }();
  return *v;
}

bool ValidUtf8(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    uint32_t cp = n == 1 ? c : c & (0x7F >> n);
    for (size_t k = 1; k < n; ++k) {
      const unsigned char cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3F);
    }
    const uint32_t min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min_cp[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += n;
  }
  return true;
}

void CheckCApi(const trine_model* model, const std::string& text, bool add_special, bool parse_special) {
  const int32_t len = static_cast<int32_t>(text.size());
  const int32_t needed = trine_tokenize(model, text.data(), len, nullptr, 0, add_special, parse_special);
  Check(needed <= 0, "size query returns -(needed) or 0");
  std::vector<trine_token> ids(static_cast<size_t>(-needed));
  if (!ids.empty()) {
    Check(trine_last_status() == TRINE_ERROR_BUFFER_TOO_SMALL, "size query sets BUFFER_TOO_SMALL");
    const int32_t short_n = trine_tokenize(model, text.data(), len, ids.data(), -needed - 1, add_special, parse_special);
    Check(short_n == needed, "one item short still reports -(needed)");
  }
  const int32_t n = trine_tokenize(model, text.data(), len, ids.data(), -needed, add_special, parse_special);
  Check(n == -needed, "a buffer of the reported size is enough");
  const int32_t bytes = trine_detokenize(model, ids.data(), n, nullptr, 0, false, false);
  Check(bytes <= 0, "detokenize size query returns -(needed) or 0");
  std::string out(static_cast<size_t>(-bytes), '\0');
  Check(trine_detokenize(model, ids.data(), n, out.data(), -bytes, false, false) == -bytes,
        "detokenize fills the reported size");
  for (int32_t i = 0; i < n; ++i) {
    char piece[8];
    const int32_t r = trine_token_to_piece(model, ids[i], piece, sizeof(piece), true);
    Check(r != TRINE_SIZE_ERROR, "valid ids have pieces");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0 || size > 4096) return 0;  // longer inputs add time, not paths
  const Vocabs& v = Shared();
  const int which = data[0] & 3;
  const bool add_special = (data[0] >> 2) & 1, parse_special = (data[0] >> 3) & 1;
  const std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
  const trine::Tokenizer& tok = *v.tok[which];

  std::vector<trine::TokenId> ids;
  Check(tok.Tokenize(text, add_special, parse_special, &ids).ok(), "Tokenize never fails");
  for (trine::TokenId id : ids) Check(tok.IsValid(id), "token id in range");
  std::string back;
  Check(tok.Detokenize(ids, &back, add_special, false).ok(), "Detokenize of Tokenize's ids succeeds");
  if (which == 3 && !parse_special && ValidUtf8(text)) Check(back == text, "deepseek-llm round trip is exact");
  for (trine::TokenId id : ids) (void)tok.TokenToPiece(id, true);

  if ((data[0] >> 4) & 1) CheckCApi(v.model, text, add_special, parse_special);
  return 0;
}
