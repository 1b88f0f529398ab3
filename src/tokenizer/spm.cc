// SentencePiece-style tokenization (llama.cpp's llm_tokenizer_spm results).
#include <cstdint>
#include <queue>
#include <string>

#include "tokenizer/tokenizer_internal.h"
#include "tokenizer/unicode.h"

namespace trine::internal {
namespace {

// A piece of the text: bytes [start, start + len) of the fragment; len 0 once merged away.
struct Piece {
  int prev;
  int next;
  uint32_t start;
  uint32_t len;
};

// A candidate merge of pieces left and right whose joined text (size bytes) is a token.
struct Candidate {
  float score;
  int left;
  int right;
  uint32_t size;
};

// Highest score first; among equal scores the leftmost pair.
struct CandidateOrder {
  bool operator()(const Candidate& a, const Candidate& b) const {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  }
};

}  // namespace

Status SpmEncode(const Vocab& vocab, std::string_view text, std::vector<TokenId>* out) {
  std::vector<Piece> pieces;
  pieces.reserve(text.size());
  for (size_t off = 0; off < text.size();) {
    const size_t len = std::min(unicode::SeqLen(static_cast<uint8_t>(text[off])), text.size() - off);
    const int index = static_cast<int>(pieces.size());
    pieces.push_back(Piece{index - 1, off + len == text.size() ? -1 : index + 1, static_cast<uint32_t>(off),
                           static_cast<uint32_t>(len)});
    off += len;
  }
  if (pieces.empty()) return Status::Ok();

  std::priority_queue<Candidate, std::vector<Candidate>, CandidateOrder> queue;
  const auto consider = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    const Piece& l = pieces[static_cast<size_t>(left)];
    const Piece& r = pieces[static_cast<size_t>(right)];
    const TokenId id = vocab.Find(text.substr(l.start, l.len + r.len));
    if (id < 0) return;
    queue.push(Candidate{vocab.score(id), left, right, l.len + r.len});
  };
  for (size_t i = 1; i < pieces.size(); ++i) consider(static_cast<int>(i) - 1, static_cast<int>(i));

  while (!queue.empty()) {
    const Candidate c = queue.top();
    queue.pop();
    Piece& l = pieces[static_cast<size_t>(c.left)];
    Piece& r = pieces[static_cast<size_t>(c.right)];
    // Stale: one side was merged into something else since this candidate was queued.
    if (l.len == 0 || r.len == 0 || l.len + r.len != c.size) continue;
    l.len += r.len;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) pieces[static_cast<size_t>(r.next)].prev = c.left;
    consider(l.prev, c.left);
    consider(c.left, l.next);
  }

  for (int i = 0; i != -1; i = pieces[static_cast<size_t>(i)].next) {
    const Piece& p = pieces[static_cast<size_t>(i)];
    const std::string_view s = text.substr(p.start, p.len);
    const TokenId id = vocab.Find(s);
    if (id >= 0) {
      out->push_back(id);
      continue;
    }
    for (char ch : s) {
      TokenId b = vocab.byte_token(static_cast<uint8_t>(ch));
      if (b < 0) b = vocab.unk();
      if (b < 0) {
        return InvalidArgument("text has a byte (0x" + std::to_string(static_cast<uint8_t>(ch)) +
                               ") that the vocabulary cannot represent: no byte token and no <unk>");
      }
      out->push_back(b);
    }
  }
  return Status::Ok();
}

}  // namespace trine::internal
