// Tokenizer behaviour beyond the llama.cpp vectors: round trips, the prompts of the shipped
// models' llama.cpp references, special tokens, bad input, pieces, detokenize rules, and the
// vocabulary tables and pre-tokenizer selection.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <string>
#include <vector>

#include "gguf/gguf_writer.h"
#include "test_vectors.h"
#include "tokenizer/pretokenize.h"

namespace trine::testing {
namespace {

const char* const kSpm = "vocab/ggml-vocab-llama-spm.gguf";
const char* const kLlama3 = "vocab/ggml-vocab-llama-bpe.gguf";
const char* const kGpt2 = "vocab/ggml-vocab-gpt-2.gguf";
const char* const kDeepseek = "vocab/ggml-vocab-deepseek-llm.gguf";

std::vector<TokenId> Tok(const Tokenizer& t, const std::string& text, bool add_special = false,
                         bool parse_special = false) {
  std::vector<TokenId> ids;
  const Status st = t.Tokenize(text, add_special, parse_special, &ids);
  EXPECT_TRUE(st.ok()) << st.message();
  return ids;
}

std::string Detok(const Tokenizer& t, const std::vector<TokenId>& ids, bool remove_special = false,
                  bool render_special = false) {
  std::string s;
  const Status st = t.Detokenize(ids, &s, remove_special, render_special);
  EXPECT_TRUE(st.ok()) << st.message();
  return s;
}

std::string Replace(std::string s, const std::string& from, const std::string& to) {
  for (size_t p = 0; (p = s.find(from, p)) != std::string::npos; p += to.size()) s.replace(p, from.size(), to);
  return s;
}

// --- Round trip over the llama.cpp test strings --------------------------------------------

TEST(TokenizerRoundTrip, VectorStringsComeBack) {
  for (const char* file : {kSpm, kLlama3, kGpt2, kDeepseek}) {
    const Tokenizer& tok = SharedTokenizer(file);
    const auto cases = ReadCases(std::string(file).substr(6));
    ASSERT_EQ(cases.size(), 46u);
    for (size_t i = 0; i < cases.size(); ++i) {
      const std::string& s = cases[i].text;
      // llama.cpp's clean_up_tokenization_spaces (on for gpt-2 and llama-bpe, off for SPM and
      // deepseek-llm) turns the one " ?" in these strings (after U+1F601) into "?".
      const std::string expected =
          tok.vocab().clean_spaces() ? Replace(s, "\xF0\x9F\x98\x81 ?", "\xF0\x9F\x98\x81?") : s;
      EXPECT_EQ(Detok(tok, Tok(tok, s)), expected) << file << " case " << i;
      // The expected ids detokenize the same way (so this is not a property of our ids only).
      EXPECT_EQ(Detok(tok, cases[i].ids), expected) << file << " case " << i;
    }
  }
}

TEST(TokenizerRoundTrip, CleanSpacesRules) {
  const Tokenizer& gpt2 = SharedTokenizer(kGpt2);
  ASSERT_TRUE(gpt2.vocab().clean_spaces());
  const std::string in = "a , b . c ! d ? e ' f 's 'm 're 've 't 'd 'll ' ' x";
  // pass 1 drops the space before , . ! ?; pass 2 joins a lone ' to both neighbours (the
  // space it eats is gone for the next check); pass 3 joins 's 'm 're 've but not 't 'd 'll.
  EXPECT_EQ(Detok(gpt2, Tok(gpt2, in)), "a, b. c! d? e'f's'm're've 't 'd 'll'' x");
  const Tokenizer& ds = SharedTokenizer(kDeepseek);
  ASSERT_FALSE(ds.vocab().clean_spaces());
  EXPECT_EQ(Detok(ds, Tok(ds, in)), in);
}

// --- Prompts of the llama.cpp references of the shipped models ------------------------------

TEST(TokenizerModels, PromptIdsMatchLlamaCppReferences) {
  const std::pair<const char*, const char*> pairs[] = {
      {"ref/bitnet-tiny-stories-f32.json", "bitnet-tiny-stories-TQ2_0-f16emb.gguf"},
      {"ref/bitnet-tiny-stories-TQ2_0-f16emb.json", "bitnet-tiny-stories-TQ2_0-f16emb.gguf"},
      {"ref/stories260K.json", "stories260K.gguf"},
      {"ref/tiny-tern-f16.json", "tiny-tern-f16.gguf"},
      {"ref/tiny-tern-tq2_0.json", "tiny-tern-tq2_0.gguf"},
      {"ref/tiny-tern-q4_k_m.json", "tiny-tern-q4_k_m.gguf"},
  };
  int checked = 0;
  for (const auto& [json_file, model_file] : pairs) {
    const nlohmann::json ref = nlohmann::json::parse(Slurp(ModelPath(json_file)));
    ASSERT_TRUE(ref["settings"]["add_special"].get<bool>());
    ASSERT_FALSE(ref["settings"]["parse_special"].get<bool>());
    const Tokenizer& tok = SharedTokenizer(model_file);
    for (const auto& p : ref["prompts"]) {
      const std::string prompt = p["prompt"].get<std::string>();
      const auto expected = p["prompt_tokens"].get<std::vector<TokenId>>();
      EXPECT_EQ(IdsToString(Tok(tok, prompt, /*add_special=*/true)), IdsToString(expected))
          << model_file << ": '" << prompt << "'";
      ++checked;
    }
  }
  EXPECT_EQ(checked, 18);
  // The one the brief names explicitly.
  EXPECT_EQ(Tok(SharedTokenizer("stories260K.gguf"), "Once upon a time", true),
            (std::vector<TokenId>{1, 403, 407, 261, 378}));
}

// --- Special tokens ----------------------------------------------------------------------------

TEST(TokenizerSpecial, ControlTokensOnlyWithParseSpecial) {
  const Tokenizer& tok = SharedTokenizer(kLlama3);
  const std::string text = "<|begin_of_text|>Hello<|eot_id|> world";
  EXPECT_EQ(Tok(tok, text, false, true), (std::vector<TokenId>{128000, 9906, 128009, 1917}));
  const auto plain = Tok(tok, text, false, false);
  for (TokenId id : plain) EXPECT_LT(id, 128000) << "control token produced without parse_special";
  EXPECT_EQ(Detok(tok, plain), text);  // the text of the markers is tokenized as text
  // add_special adds BOS in front of everything (llama-bpe: add_bos_token = true, no EOS).
  EXPECT_EQ(Tok(tok, "Hello", true, false), (std::vector<TokenId>{128000, 9906}));
}

TEST(TokenizerSpecial, SpmSpacePrefixAfterEachSpecialToken) {
  const Tokenizer& tok = SharedTokenizer(kSpm);
  // "<s>" and "</s>" are control tokens; after each special token the next text fragment gets
  // the SentencePiece space prefix again (llama.cpp), so "Hello" is "▁Hello" (15043).
  EXPECT_EQ(Tok(tok, "<s>Hello</s>", false, true), (std::vector<TokenId>{1, 15043, 2}));
  EXPECT_EQ(Tok(tok, "Hello world", true, false), (std::vector<TokenId>{1, 15043, 3186}));
  // Without parse_special "<s>" is text: no id 1 or 2 appears.
  for (TokenId id : Tok(tok, "<s>Hello</s>", false, false)) {
    EXPECT_NE(id, 1);
    EXPECT_NE(id, 2);
  }
  // <unk> is an unknown-type token: recognised with parse_special only.
  EXPECT_EQ(Tok(tok, "<unk>", false, true), (std::vector<TokenId>{0}));
}

TEST(TokenizerSpecial, UserDefinedTokensAlwaysCutOut) {
  const Tokenizer& tok = SharedTokenizer(kDeepseek);
  const TokenId o_slash = tok.vocab().Find("\xc3\xb8");  // "ø" is a user-defined token there
  ASSERT_GE(o_slash, 0);
  ASSERT_TRUE(tok.vocab().attr(o_slash) & kAttrUserDefined);
  EXPECT_EQ(Tok(tok, "\xc3\xb8", false, false), (std::vector<TokenId>{o_slash}));
  const auto ids = Tok(tok, "x\xc3\xb8y", false, false);
  ASSERT_EQ(ids.size(), 3u);
  EXPECT_EQ(ids[1], o_slash);
  EXPECT_EQ(tok.TokenToPiece(o_slash, false), "\xc3\xb8");  // user-defined: rendered as is
}

TEST(TokenizerSpecial, LongestSpecialTokenWins) {
  const Vocab& v = SharedTokenizer(kLlama3).vocab();
  const auto& sp = v.special_tokens();
  ASSERT_EQ(sp.size(), 256u);
  for (size_t i = 1; i < sp.size(); ++i) EXPECT_GE(v.token(sp[i - 1]).size(), v.token(sp[i]).size());
}

// --- Bad and empty input -----------------------------------------------------------------------

TEST(TokenizerInput, EmptyString) {
  EXPECT_TRUE(Tok(SharedTokenizer(kSpm), "").empty());
  EXPECT_EQ(Tok(SharedTokenizer(kSpm), "", true), (std::vector<TokenId>{1}));
  EXPECT_EQ(Tok(SharedTokenizer(kLlama3), "", true), (std::vector<TokenId>{128000}));
  EXPECT_TRUE(Tok(SharedTokenizer(kGpt2), "", true).empty());  // gpt-2 does not add BOS
  EXPECT_EQ(Detok(SharedTokenizer(kGpt2), {}), "");
}

TEST(TokenizerInput, InvalidUtf8SpmUsesByteTokens) {
  const Tokenizer& tok = SharedTokenizer(kSpm);
  const std::string bad = "a\xff" "b\xc3";  // a stray 0xFF and a truncated 2-byte sequence
  const auto ids = Tok(tok, bad);
  // <0xFF> is id 3 + 0xFF; <0xC3> is id 3 + 0xC3 (byte tokens start at id 3 in Llama-2).
  EXPECT_NE(std::find(ids.begin(), ids.end(), 3 + 0xFF), ids.end());
  EXPECT_EQ(ids.back(), 3 + 0xC3);
  EXPECT_EQ(Detok(tok, ids), bad);  // byte tokens give the bytes back exactly
}

TEST(TokenizerInput, InvalidUtf8BpeBecomesReplacementChar) {
  for (const char* file : {kLlama3, kGpt2, kDeepseek}) {
    const Tokenizer& tok = SharedTokenizer(file);
    // Each bad byte is read as U+FFFD, as llama.cpp's decoder does.
    EXPECT_EQ(Tok(tok, "x\xff" "y\xe2\x82"), Tok(tok, "x\xef\xbf\xbdy\xef\xbf\xbd\xef\xbf\xbd")) << file;
    EXPECT_EQ(Detok(tok, Tok(tok, "\x80")), "\xef\xbf\xbd") << file;
    // Overlong and surrogate forms are decoded leniently, not rejected.
    EXPECT_FALSE(Tok(tok, "\xc1\x81 \xed\xa0\x80 \xf7\xbf\xbf\xbf").empty()) << file;
  }
}

TEST(TokenizerInput, OutOfRangeIds) {
  const Tokenizer& tok = SharedTokenizer(kSpm);
  std::string out;
  Status st = tok.Detokenize({1, 15043, 32000}, &out);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("token id 32000 at position 2"), std::string::npos) << st.message();
  st = tok.Detokenize({-1}, &out);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(tok.TokenToPiece(-1, true), "");
  EXPECT_EQ(tok.TokenToPiece(32000, true), "");
  EXPECT_FALSE(tok.IsValid(32000));
  EXPECT_TRUE(tok.IsValid(31999));
}

// --- Pieces and detokenize ---------------------------------------------------------------------

TEST(TokenizerPieces, SpmPieces) {
  const Tokenizer& tok = SharedTokenizer(kSpm);
  EXPECT_EQ(tok.TokenToPiece(15043, false), " Hello");  // "▁Hello"
  EXPECT_EQ(tok.TokenToPiece(1, false), "");            // control, not rendered
  EXPECT_EQ(tok.TokenToPiece(1, true), "<s>");
  EXPECT_EQ(tok.TokenToPiece(0, false), "");            // unknown, not rendered
  EXPECT_EQ(tok.TokenToPiece(0, true), "<unk>");
  EXPECT_EQ(tok.TokenToPiece(3 + 0x0A, false), "\n");   // <0x0A>
}

TEST(TokenizerPieces, BpePieces) {
  const Tokenizer& gpt2 = SharedTokenizer(kGpt2);
  EXPECT_EQ(gpt2.TokenToPiece(995, false), " world");  // "Ġworld"
  EXPECT_EQ(gpt2.TokenToPiece(50256, false), "");
  EXPECT_EQ(gpt2.TokenToPiece(50256, true), "<|endoftext|>");
  const Tokenizer& l3 = SharedTokenizer(kLlama3);
  EXPECT_EQ(l3.TokenToPiece(128009, true), "<|eot_id|>");
  EXPECT_EQ(l3.TokenToPiece(198, false), "\n");  // "Ċ"
}

TEST(TokenizerDetokenize, SpmLeadingSpace) {
  const Tokenizer& tok = SharedTokenizer(kSpm);
  // As llama_detokenize: the space prefix of the first piece is dropped...
  EXPECT_EQ(Detok(tok, {15043, 3186}), "Hello world");
  // ...but not when a BOS comes first (rendered or not, kept or removed): llama.cpp only strips
  // the first token's space and a BOS in front switches that off.
  EXPECT_EQ(Detok(tok, {1, 15043, 3186}), " Hello world");
  EXPECT_EQ(Detok(tok, {1, 15043, 3186}, false, true), "<s> Hello world");
  EXPECT_EQ(Detok(tok, {1, 15043, 3186}, true, true), " Hello world");
  // remove_special drops the BOS only when the vocab adds one, and never an EOS it does not add.
  EXPECT_EQ(Detok(tok, {1, 15043, 2}, true, true), " Hello</s>");
}

// --- Vocabulary tables and pre-tokenizer selection -----------------------------------------

TEST(TokenizerVocab, PreTokenizerKinds) {
  EXPECT_EQ(SharedTokenizer(kSpm).vocab().pre_kind(), PreTokenizerKind::kNone);
  EXPECT_EQ(SharedTokenizer(kLlama3).vocab().pre_kind(), PreTokenizerKind::kLlama3);
  EXPECT_TRUE(SharedTokenizer(kLlama3).vocab().ignore_merges());
  EXPECT_EQ(SharedTokenizer(kGpt2).vocab().pre_kind(), PreTokenizerKind::kGpt2);
  EXPECT_FALSE(SharedTokenizer(kGpt2).vocab().ignore_merges());
  EXPECT_EQ(SharedTokenizer(kDeepseek).vocab().pre_kind(), PreTokenizerKind::kDeepseekLlm);
}

TEST(TokenizerVocab, MergesAndIndex) {
  const Vocab& v = SharedTokenizer(kGpt2).vocab();
  EXPECT_EQ(v.MergeRank("\xc4\xa0", "t"), 0);  // first merge: "Ġ t"
  EXPECT_EQ(v.MergeRank("\xc4\xa0", "a"), 1);
  EXPECT_EQ(v.MergeRank("t", "\xc4\xa0"), -1);
  TokenId merged = -1;
  EXPECT_EQ(v.MergeRank(v.Find("\xc4\xa0"), v.Find("t"), &merged), 0);
  EXPECT_EQ(merged, v.Find("\xc4\xa0t"));
  EXPECT_EQ(v.Find("<|endoftext|>"), 50256);
  EXPECT_EQ(v.Find("no such token text"), -1);
  EXPECT_EQ(v.byte_token(' '), v.Find("\xc4\xa0"));
  for (int id = 0; id < v.size(); id += 997) EXPECT_EQ(v.Find(v.token(id)), id);
  const Vocab& spm = SharedTokenizer(kSpm).vocab();
  EXPECT_EQ(spm.byte_token(0x0A), 3 + 0x0A);
  EXPECT_EQ(spm.unk(), 0);
}

TEST(TokenizerVocab, EndOfGenerationTokens) {
  const Vocab& l3 = SharedTokenizer(kLlama3).vocab();
  EXPECT_TRUE(l3.IsEog(128001));  // eos <|end_of_text|>
  EXPECT_TRUE(l3.IsEog(128009));  // <|eot_id|> by name
  EXPECT_EQ(l3.eot(), 128009);
  EXPECT_FALSE(l3.IsEog(128000));
  const Vocab& gpt2 = SharedTokenizer(kGpt2).vocab();
  EXPECT_TRUE(gpt2.IsEog(50256));
}

// A copy of the gpt-2 vocabulary file with tokenizer.ggml.pre changed (or removed when empty).
std::unique_ptr<Tokenizer> Gpt2WithPre(const std::string& pre, Status* status) {
  std::unique_ptr<GgufFile> src;
  EXPECT_TRUE(GgufFile::Open(ModelPath(kGpt2), &src).ok());
  GgufWriter w;
  for (const auto& [k, val] : src->metadata()) w.Set(k, val);
  if (pre.empty()) {
    w.Remove("tokenizer.ggml.pre");
  } else {
    w.Set("tokenizer.ggml.pre", GgufValue::String(pre));
  }
  const std::string path = TempPath("gpt2-pre-" + (pre.empty() ? std::string("none") : pre) + ".gguf");
  EXPECT_TRUE(w.WriteFile(path).ok());
  std::unique_ptr<GgufFile> f;
  EXPECT_TRUE(GgufFile::Open(path, &f).ok());
  std::unique_ptr<Tokenizer> tok;
  *status = Tokenizer::FromGguf(*f, &tok);
  return tok;
}

TEST(TokenizerVocab, MissingPreMeansDefaultRegexes) {
  Status st;
  auto tok = Gpt2WithPre("", &st);
  ASSERT_TRUE(st.ok()) << st.message();
  const Vocab& v = tok->vocab();
  EXPECT_EQ(v.pre_kind(), PreTokenizerKind::kDefault);
  // The default list splits punctuation runs off first, so "don't" is don + ' + t, where the
  // gpt-2 regex gives don + 't.
  EXPECT_EQ(Tok(*tok, "don't"), (std::vector<TokenId>{v.Find("don"), v.Find("'"), v.Find("t")}));
  EXPECT_EQ(Tok(SharedTokenizer(kGpt2), "don't"), (std::vector<TokenId>{v.Find("don"), v.Find("'t")}));
  // and cuts digit runs in threes: 12345 -> 123 45.
  EXPECT_EQ(Tok(*tok, "12345"), (std::vector<TokenId>{v.Find("123"), v.Find("45")}));
}

TEST(TokenizerVocab, UnknownPreIsUnsupported) {
  Status st;
  auto tok = Gpt2WithPre("no-such-pre", &st);
  EXPECT_EQ(st.code(), StatusCode::kUnsupported);
  EXPECT_NE(st.message().find("no-such-pre"), std::string::npos) << st.message();
  EXPECT_EQ(tok, nullptr);
}

TEST(TokenizerVocab, OtherPreTokenizerFamilies) {
  // Every family builds, and differs from gpt-2's where llama.cpp's regexes differ.
  for (const char* pre : {"mpt", "starcoder", "refact", "falcon", "qwen2", "deepseek-coder", "dbrx", "smaug-bpe",
                          "llama3", "olmo", "bloom", "command-r", "stablelm2"}) {
    Status st;
    auto tok = Gpt2WithPre(pre, &st);
    ASSERT_TRUE(st.ok()) << pre << ": " << st.message();
    EXPECT_FALSE(Tok(*tok, "Hello world 12345!").empty()) << pre;
  }
  Status st;
  const Vocab& v = SharedTokenizer(kGpt2).vocab();
  // starcoder isolates every digit; qwen2 too; llama3 groups up to three.
  EXPECT_EQ(Tok(*Gpt2WithPre("starcoder", &st), "2024"),
            (std::vector<TokenId>{v.Find("2"), v.Find("0"), v.Find("2"), v.Find("4")}));
  EXPECT_EQ(Tok(*Gpt2WithPre("qwen2", &st), "2024"),
            (std::vector<TokenId>{v.Find("2"), v.Find("0"), v.Find("2"), v.Find("4")}));
  EXPECT_EQ(Tok(*Gpt2WithPre("dbrx", &st), "2024"), (std::vector<TokenId>{v.Find("202"), v.Find("4")}));
}

TEST(TokenizerPreTokenizer, SplitsAsLlamaCpp) {
  std::unique_ptr<PreTokenizer> pt;
  ASSERT_TRUE(PreTokenizer::Create(PreTokenizer::Patterns(PreTokenizerKind::kLlama3), &pt).ok());
  std::vector<std::string> w;
  ASSERT_TRUE(pt->Split("Hello  world's 12345\n\n  x", &w).ok());
  EXPECT_EQ(w, (std::vector<std::string>{"Hello", " ", " world", "'s", " ", "123", "45", "\n\n", " ", " x"}));
  // A non-ASCII space (U+3000) counts as \s like an ASCII one.
  w.clear();
  ASSERT_TRUE(pt->Split("a\xe3\x80\x80\xe3\x80\x80" "b", &w).ok());
  EXPECT_EQ(w, (std::vector<std::string>{"a", "\xe3\x80\x80", "\xe3\x80\x80" "b"}));
  // A regex that does not compile is an error, not a crash.
  EXPECT_FALSE(PreTokenizer::Create({"([unclosed"}, &pt).ok());
}

TEST(TokenizerSpeed, LargeVocabLoadsAndTokenizesQuickly) {
  const auto t0 = std::chrono::steady_clock::now();
  std::unique_ptr<GgufFile> f;
  ASSERT_TRUE(GgufFile::Open(ModelPath(kLlama3), &f).ok());
  std::unique_ptr<Tokenizer> tok;
  ASSERT_TRUE(Tokenizer::FromGguf(*f, &tok).ok());
  const auto t1 = std::chrono::steady_clock::now();
  std::string text;
  for (int i = 0; i < 1000; ++i) text += "The quick brown fox jumps over the lazy dog, y'all! 1234567 \xe6\x88\x91\n";
  std::vector<TokenId> ids;
  ASSERT_TRUE(tok->Tokenize(text, true, false, &ids).ok());
  const auto t2 = std::chrono::steady_clock::now();
  const double load_s = std::chrono::duration<double>(t1 - t0).count();
  const double tok_s = std::chrono::duration<double>(t2 - t1).count();
  // Generous bounds (a loaded 2-core CI machine, debug builds): ~0.3 s and ~0.05 s measured.
  EXPECT_LT(load_s, 3.0) << "open + load of the 128k-token vocabulary";
  EXPECT_LT(tok_s, 2.0) << "tokenizing " << text.size() << " bytes";
  EXPECT_GT(ids.size(), 10000u);
}

}  // namespace
}  // namespace trine::testing
