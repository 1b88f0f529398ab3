#include "tokenizer/jinja/lexer.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "tokenizer/jinja/value.h"
#include "tokenizer/unicode.h"

namespace trine::jinja {
namespace {

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }
bool IsNameStart(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }

class Lexer {
 public:
  explicit Lexer(const std::string& src) : src_(src) {}

  std::vector<Token> Run() {
    // keep_trailing_newline is off: one final newline of the source is not output.
    size_t end = src_.size();
    if (end > 0 && src_[end - 1] == '\n') --end;
    if (end > 0 && src_[end - 1] == '\r' && end < src_.size()) --end;
    size_t pos = 0;
    bool line_start = true;  // the text that follows starts a line (for lstrip_blocks)
    std::string text;
    while (pos < end) {
      const size_t open = FindOpen(pos, end);
      text.append(src_, pos, open - pos);
      CountLines(pos, open);
      if (open == end) break;
      const char kind = src_[open + 1];  // '{', '%' or '#'
      size_t p = open + 2;
      const char mod = p < end ? src_[p] : '\0';
      if (mod == '-') {
        while (!text.empty() && IsSpace(text.back())) text.pop_back();
        ++p;
      } else if (mod == '+' && kind != '{') {
        ++p;
      } else if (kind != '{') {
        LstripLine(&text, line_start);
      }
      if (kind == '%' && IsRawTag(p, end)) {
        FlushText(&text);
        pos = LexRaw(open, end, &line_start);
        continue;
      }
      FlushText(&text);
      if (kind == '#') {
        pos = LexCommentEnd(p, end, &line_start);
      } else {
        pos = LexTag(kind, p, end, &line_start);
      }
    }
    FlushText(&text);
    Token t{Token::Type::kEnd, "", 0, 0, line_};
    tokens_.push_back(t);
    return std::move(tokens_);
  }

 private:
  size_t FindOpen(size_t pos, size_t end) const {
    for (size_t i = pos; i + 1 < end; ++i) {
      if (src_[i] == '{' && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) return i;
    }
    return end;
  }

  void CountLines(size_t from, size_t to) {
    for (size_t i = from; i < to; ++i) line_ += src_[i] == '\n';
  }

  // lstrip_blocks: spaces and tabs between the start of a line and a block tag are not output.
  static void LstripLine(std::string* text, bool line_start) {
    size_t i = text->size();
    while (i > 0 && ((*text)[i - 1] == ' ' || (*text)[i - 1] == '\t')) --i;
    if ((i == 0 && line_start) || (i > 0 && (*text)[i - 1] == '\n')) text->resize(i);
  }

  void FlushText(std::string* text) {
    if (text->empty()) return;
    // Jinja normalises newlines in template data to "\n".
    std::string norm;
    norm.reserve(text->size());
    for (size_t i = 0; i < text->size(); ++i) {
      if ((*text)[i] == '\r') {
        norm += '\n';
        if (i + 1 < text->size() && (*text)[i + 1] == '\n') ++i;
      } else {
        norm += (*text)[i];
      }
    }
    Token t{Token::Type::kText, std::move(norm), 0, 0, line_};
    tokens_.push_back(std::move(t));
    text->clear();
  }

  // After a block or comment end: `-` strips the following whitespace, trim_blocks one newline.
  size_t AfterBlockEnd(size_t p, size_t end, bool stripped, bool* line_start) {
    if (stripped) {
      const size_t from = p;
      while (p < end && IsSpace(src_[p])) ++p;
      CountLines(from, p);
      *line_start = false;
      return p;
    }
    if (p < end && src_[p] == '\n') {
      ++line_;
      *line_start = true;
      return p + 1;
    }
    *line_start = false;
    return p;
  }

  size_t LexCommentEnd(size_t p, size_t end, bool* line_start) {
    const size_t close = src_.find("#}", p);
    if (close == std::string::npos || close + 2 > end) throw Error("unterminated comment ({# without #})", line_);
    CountLines(p, close);
    const bool strip = close > p && src_[close - 1] == '-';
    return AfterBlockEnd(close + 2, end, strip, line_start);
  }

  bool IsRawTag(size_t p, size_t end) const {
    while (p < end && IsSpace(src_[p])) ++p;
    return src_.compare(p, 3, "raw") == 0 && (p + 3 >= end || !IsNameStart(src_[p + 3]));
  }

  // {% raw %} ... {% endraw %}: the text between is output as it is.
  size_t LexRaw(size_t open, size_t end, bool* line_start) {
    size_t close = src_.find("%}", open);
    if (close == std::string::npos) throw Error("unterminated {% raw %} tag", line_);
    size_t p = AfterBlockEnd(close + 2, end, src_[close - 1] == '-', line_start);
    for (size_t q = p; q < end; ++q) {
      if (src_.compare(q, 2, "{%") != 0) continue;
      size_t r = q + 2;
      const bool strip_before = r < end && src_[r] == '-';
      if (r < end && (src_[r] == '-' || src_[r] == '+')) ++r;
      while (r < end && IsSpace(src_[r])) ++r;
      if (src_.compare(r, 6, "endraw") != 0) continue;
      std::string body = src_.substr(p, q - p);
      if (strip_before) {
        while (!body.empty() && IsSpace(body.back())) body.pop_back();
      } else {
        LstripLine(&body, false);
      }
      CountLines(p, q);
      FlushText(&body);
      const size_t tag_close = src_.find("%}", r);
      if (tag_close == std::string::npos) throw Error("unterminated {% endraw %} tag", line_);
      return AfterBlockEnd(tag_close + 2, end, src_[tag_close - 1] == '-', line_start);
    }
    throw Error("{% raw %} without {% endraw %}", line_);
  }

  void Push(Token::Type type, std::string text) { tokens_.push_back(Token{type, std::move(text), 0, 0, line_}); }

  size_t LexTag(char kind, size_t p, size_t end, bool* line_start) {
    const bool expr = kind == '{';
    Push(expr ? Token::Type::kExprOpen : Token::Type::kStmtOpen, "");
    const int open_line = line_;
    std::string brackets;  // open ( [ { inside the tag: }} and %} close the tag only outside them
    while (true) {
      while (p < end && IsSpace(src_[p])) {
        line_ += src_[p] == '\n';
        ++p;
      }
      if (p >= end) {
        throw Error(std::string("unterminated ") + (expr ? "{{ expression" : "{% statement") + " (no closing " +
                        (expr ? "}}" : "%}") + ")",
                    open_line);
      }
      const char close = expr ? '}' : '%';
      if (brackets.empty()) {
        const bool dash = src_[p] == '-' && p + 2 < end + 1 && src_.compare(p + 1, 2, std::string(1, close) + "}") == 0;
        if (dash || (src_[p] == close && p + 1 < end && src_[p + 1] == '}')) {
          p += dash ? 3 : 2;
          Push(expr ? Token::Type::kExprClose : Token::Type::kStmtClose, "");
          if (expr) {
            if (dash) return AfterBlockEnd(p, end, true, line_start);
            *line_start = false;
            return p;
          }
          return AfterBlockEnd(p, end, dash, line_start);
        }
        if (!expr && src_[p] == '+' && p + 2 < end + 1 && src_.compare(p + 1, 2, "%}") == 0) {
          // {% ... +%}: trim_blocks off for this tag.
          Push(Token::Type::kStmtClose, "");
          *line_start = false;
          return p + 3;
        }
      }
      const char c = src_[p];
      if (IsNameStart(c)) {
        size_t q = p;
        while (q < end && (IsNameStart(src_[q]) || IsDigit(src_[q]))) ++q;
        Push(Token::Type::kName, src_.substr(p, q - p));
        p = q;
      } else if (IsDigit(c)) {
        p = LexNumber(p, end);
      } else if (c == '\'' || c == '"') {
        p = LexString(p, end);
      } else {
        static const char* kOps[] = {"**", "//", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~", "<",
                                     ">",  "=",  ".",  ",",  ":",  "|",  "(", ")", "[", "]", "{", "}"};
        const char* op = nullptr;
        for (const char* o : kOps) {
          if (src_.compare(p, std::strlen(o), o) == 0 && p + std::strlen(o) <= end) {
            op = o;
            break;
          }
        }
        if (op == nullptr) {
          throw Error(std::string("unexpected character '") + c + "' in a " + (expr ? "{{ }}" : "{% %}") + " tag",
                      line_);
        }
        if (*op == '(' || *op == '[' || *op == '{') brackets += *op;
        if (*op == ')' || *op == ']' || *op == '}') {
          if (!brackets.empty()) brackets.pop_back();
        }
        Push(Token::Type::kOp, op);
        p += std::strlen(op);
      }
    }
  }

  size_t LexNumber(size_t p, size_t end) {
    size_t q = p;
    bool is_float = false;
    while (q < end && (IsDigit(src_[q]) || src_[q] == '_')) ++q;
    if (q + 1 < end && src_[q] == '.' && IsDigit(src_[q + 1])) {
      is_float = true;
      ++q;
      while (q < end && (IsDigit(src_[q]) || src_[q] == '_')) ++q;
    }
    if (q < end && (src_[q] == 'e' || src_[q] == 'E')) {
      size_t r = q + 1;
      if (r < end && (src_[r] == '+' || src_[r] == '-')) ++r;
      if (r < end && IsDigit(src_[r])) {
        is_float = true;
        q = r;
        while (q < end && IsDigit(src_[q])) ++q;
      }
    }
    std::string digits;
    for (size_t i = p; i < q; ++i) {
      if (src_[i] != '_') digits += src_[i];
    }
    Token t{is_float ? Token::Type::kFloat : Token::Type::kInt, digits, 0, 0, line_};
    errno = 0;
    if (is_float) {
      t.float_value = std::strtod(digits.c_str(), nullptr);
    } else {
      t.int_value = std::strtoll(digits.c_str(), nullptr, 10);
      if (errno == ERANGE) throw Error("integer literal " + digits + " is too large", line_);
    }
    tokens_.push_back(std::move(t));
    return q;
  }

  size_t LexString(size_t p, size_t end) {
    const char quote = src_[p];
    std::string value;
    size_t q = p + 1;
    for (;; ++q) {
      if (q >= end) throw Error("unterminated string literal", line_);
      const char c = src_[q];
      if (c == quote) break;
      if (c == '\n') ++line_;
      if (c != '\\' || q + 1 >= end) {
        value += c;
        continue;
      }
      const char e = src_[++q];
      switch (e) {
        case 'n': value += '\n'; break;
        case 't': value += '\t'; break;
        case 'r': value += '\r'; break;
        case '\\': value += '\\'; break;
        case '\'': value += '\''; break;
        case '"': value += '"'; break;
        case '\n': ++line_; break;  // line continuation
        case 'x':
        case 'u':
        case 'U': {
          const size_t n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          if (q + n >= end) throw Error("truncated \\" + std::string(1, e) + " escape in a string literal", line_);
          uint32_t cp = 0;
          for (size_t k = 1; k <= n; ++k) {
            const char h = src_[q + k];
            const int d = IsDigit(h) ? h - '0' : (h >= 'a' && h <= 'f') ? h - 'a' + 10 : (h >= 'A' && h <= 'F') ? h - 'A' + 10 : -1;
            if (d < 0) throw Error("bad \\" + std::string(1, e) + " escape in a string literal", line_);
            cp = cp * 16 + static_cast<uint32_t>(d);
          }
          if (cp > 0x10FFFF) throw Error("\\U escape beyond U+10FFFF in a string literal", line_);
          unicode::AppendUtf8(cp, &value);
          q += n;
          break;
        }
        default:  // Python keeps unknown escapes as written
          value += '\\';
          value += e;
      }
    }
    Push(Token::Type::kString, std::move(value));
    return q + 1;
  }

  const std::string& src_;
  std::vector<Token> tokens_;
  int line_ = 1;
};

}  // namespace

std::vector<Token> Lex(const std::string& source) { return Lexer(source).Run(); }

}  // namespace trine::jinja
