// Byte-level BPE tokenization of one pre-tokenizer word (llama.cpp's llm_tokenizer_bpe results).
#include <cstdint>
#include <queue>
#include <string>

#include "tokenizer/tokenizer_internal.h"
#include "tokenizer/unicode.h"

namespace trine::internal {
namespace {

// A symbol of the word: bytes [start, start + len) of the mapped text, its token id (-1 when
// the text is not a token); len 0 once merged into its left neighbour.
struct Symbol {
  int prev;
  int next;
  uint32_t start;
  uint32_t len;
  TokenId id;
};

// A candidate merge of symbols left and right (size bytes together) with its rank and result.
struct Candidate {
  int rank;
  int left;
  int right;
  uint32_t size;
  TokenId merged;
};

// Lowest rank first; among equal ranks the leftmost pair.
struct CandidateOrder {
  bool operator()(const Candidate& a, const Candidate& b) const {
    return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
  }
};

}  // namespace

void BpeEncodeWord(const Vocab& vocab, std::string_view word, bool ignore_merges, std::vector<TokenId>* out) {
  std::string text;
  text.reserve(word.size() * 2);
  for (char ch : word) text += unicode::ByteToUnicode(static_cast<uint8_t>(ch));
  if (text.empty()) return;

  if (ignore_merges) {
    const TokenId whole = vocab.Find(text);
    if (whole >= 0) {
      out->push_back(whole);
      return;
    }
  }

  std::vector<Symbol> syms;
  syms.reserve(word.size());
  for (size_t off = 0; off < text.size();) {
    const size_t len = std::min(unicode::SeqLen(static_cast<uint8_t>(text[off])), text.size() - off);
    const int index = static_cast<int>(syms.size());
    syms.push_back(Symbol{index - 1, off + len == text.size() ? -1 : index + 1, static_cast<uint32_t>(off),
                          static_cast<uint32_t>(len), vocab.Find(std::string_view(text).substr(off, len))});
    off += len;
  }

  std::priority_queue<Candidate, std::vector<Candidate>, CandidateOrder> queue;
  const std::string_view view(text);
  const auto consider = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    const Symbol& l = syms[static_cast<size_t>(left)];
    const Symbol& r = syms[static_cast<size_t>(right)];
    TokenId merged = -1;
    int rank = vocab.MergeRank(l.id, r.id, &merged);
    if (rank < 0 && (l.id < 0 || r.id < 0) && vocab.has_text_merges()) {
      rank = vocab.MergeRank(view.substr(l.start, l.len), view.substr(r.start, r.len));
      if (rank >= 0) merged = vocab.Find(view.substr(l.start, l.len + r.len));
    }
    if (rank < 0) return;
    queue.push(Candidate{rank, left, right, l.len + r.len, merged});
  };
  for (size_t i = 1; i < syms.size(); ++i) consider(static_cast<int>(i) - 1, static_cast<int>(i));

  while (!queue.empty()) {
    const Candidate c = queue.top();
    queue.pop();
    Symbol& l = syms[static_cast<size_t>(c.left)];
    Symbol& r = syms[static_cast<size_t>(c.right)];
    if (l.len == 0 || r.len == 0 || l.len + r.len != c.size) continue;  // stale candidate
    l.len += r.len;
    l.id = c.merged;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) syms[static_cast<size_t>(r.next)].prev = c.left;
    consider(l.prev, c.left);
    consider(c.left, l.next);
  }

  for (const Symbol& s : syms) {
    if (s.len == 0) continue;
    if (s.id >= 0) {
      out->push_back(s.id);
      continue;
    }
    // Not a token: llama.cpp looks each byte of the mapped text up as a one-byte token.
    for (char ch : view.substr(s.start, s.len)) {
      const TokenId b = vocab.Find(std::string_view(&ch, 1));
      if (b >= 0) out->push_back(b);
    }
  }
}

}  // namespace trine::internal
