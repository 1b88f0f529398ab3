// Jinja parser: tokens -> syntax tree, with Jinja2's operator precedence. Statements outside the
// subset chat templates use (extends, include, import, block, ...) are errors naming the statement.
#pragma once

#include <vector>

#include "tokenizer/jinja/ast.h"
#include "tokenizer/jinja/lexer.h"

namespace trine::jinja {

// Throws jinja::Error with the line of the offending token.
Body Parse(const std::vector<Token>& tokens);

}  // namespace trine::jinja
