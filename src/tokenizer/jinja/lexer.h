// Jinja lexer: template source -> text pieces and the tokens inside {{ }} and {% %} tags, with the
// whitespace rules Hugging Face renders chat templates under (trim_blocks, lstrip_blocks, `-`
// and `+` modifiers, one trailing newline dropped, comments removed, {% raw %} kept verbatim).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace trine::jinja {

struct Token {
  enum class Type { kText, kExprOpen, kExprClose, kStmtOpen, kStmtClose, kName, kString, kInt, kFloat, kOp, kEnd };
  Type type;
  std::string text;  // text, name, string value or operator
  int64_t int_value = 0;
  double float_value = 0;
  int line = 1;
};

// Throws jinja::Error (with the line) on an unterminated tag, comment or string.
std::vector<Token> Lex(const std::string& source);

}  // namespace trine::jinja
