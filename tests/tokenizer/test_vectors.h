// Reading llama.cpp's tokenizer test vectors (models/vocab/<vocab>.gguf.inp/.out) and opening
// the shipped vocabularies once per test process.
#pragma once

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "common/test_util.h"
#include "gguf/gguf_reader.h"
#include "tokenizer/tokenizer.h"

namespace trine::testing {

struct TokenizerCase {
  std::string text;
  std::vector<TokenId> ids;
};

inline std::string Slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// As test-tokenizer-0: the .inp file is the strings joined by "\n__ggml_vocab_test__\n" (the
// file ends with one); the .out file has one line of space-separated ids per string.
inline std::vector<TokenizerCase> ReadCases(const std::string& vocab_file) {
  const std::string inp = Slurp(ModelPath("vocab/" + vocab_file + ".inp"));
  const std::string outp = Slurp(ModelPath("vocab/" + vocab_file + ".out"));
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> texts;
  for (size_t pos = 0; pos < inp.size();) {
    const size_t next = inp.find(sep, pos);
    if (next == std::string::npos) {
      texts.push_back(inp.substr(pos));
      break;
    }
    texts.push_back(inp.substr(pos, next - pos));
    pos = next + sep.size();
  }
  std::vector<std::vector<TokenId>> ids;
  std::istringstream lines(outp);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream nums(line);
    std::vector<TokenId> v;
    for (long x; nums >> x;) v.push_back(static_cast<TokenId>(x));
    ids.push_back(v);
  }
  std::vector<TokenizerCase> cases;
  if (texts.size() != ids.size()) {
    ADD_FAILURE() << vocab_file << ": " << texts.size() << " strings but " << ids.size() << " id lines";
    return cases;
  }
  for (size_t i = 0; i < texts.size(); ++i) cases.push_back({texts[i], ids[i]});
  return cases;
}

// The tokenizer of a shipped file, loaded once per process.
inline const Tokenizer& SharedTokenizer(const std::string& model_file) {
  static std::map<std::string, std::unique_ptr<Tokenizer>> cache;
  auto it = cache.find(model_file);
  if (it != cache.end()) return *it->second;
  std::unique_ptr<GgufFile> f;
  Status st = GgufFile::Open(ModelPath(model_file), &f);
  EXPECT_TRUE(st.ok()) << st.message();
  std::unique_ptr<Tokenizer> tok;
  if (st.ok()) st = Tokenizer::FromGguf(*f, &tok);
  EXPECT_TRUE(st.ok()) << st.message();
  if (!st.ok()) std::abort();
  return *(cache[model_file] = std::move(tok));
}

inline std::string IdsToString(const std::vector<TokenId>& ids) {
  std::string s;
  for (TokenId id : ids) s += (s.empty() ? "" : " ") + std::to_string(id);
  return s;
}

}  // namespace trine::testing
