// Syntax tree of a parsed template: expressions (Expr) and statements (Node).
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tokenizer/jinja/value.h"

namespace trine::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    kLiteral,   // literal
    kName,      // name
    kList,      // kids
    kTuple,     // kids
    kDict,      // kids: key, value, key, value, ...
    kGetAttr,   // kids[0].name
    kGetItem,   // kids[0][kids[1]]
    kSlice,     // kids[0][kids[1]:kids[2]:kids[3]] (missing parts are null)
    kCall,      // kids[0](kids[1..]); the last kwnames.size() arguments are keyword arguments
    kFilter,    // kids[0] | name(kids[1..]); kids[0] is null in {% filter %} blocks
    kTest,      // kids[0] is [not] name(kids[1..])
    kUnary,     // name (not, -, +) kids[0]
    kBinary,    // kids[0] name kids[1]; name is an operator, "and", "or", "in", "not in"
    kCondition  // kids[1] if kids[0] else kids[2] (kids[2] may be null)
  };
  Kind kind;
  int line = 0;
  Value literal;
  std::string name;
  std::vector<ExprPtr> kids;
  std::vector<std::string> kwnames;
  bool negated = false;  // kTest: "is not"
  int depth = 1;         // levels of this subtree (the parser bounds it)
};

struct Node;
using NodePtr = std::unique_ptr<Node>;
using Body = std::vector<NodePtr>;

struct Node {
  enum class Kind {
    kText,         // text
    kOutput,       // {{ expr }}
    kIf,           // branches (a null condition is the else branch)
    kFor,          // for targets in expr [if cond]: body [else: else_body]
    kSet,          // set targets = expr; or set target_object.target_attr = expr
    kSetBlock,     // set targets[0]: body (the body's output is the value), optional filter
    kMacro,        // macro name(params): body
    kCallBlock,    // call [(params)] expr: body (the body is `caller()` inside the macro)
    kFilterBlock,  // filter expr: body
    kBreak,
    kContinue,
    kScope         // body rendered in place ({% generation %} and similar markers)
  };
  Kind kind;
  int line = 0;
  std::string text;
  ExprPtr expr;
  ExprPtr cond;  // kFor's filter; kSetBlock's filter (a kFilter with a null input)
  std::vector<std::pair<ExprPtr, Body>> branches;
  std::vector<std::string> targets;
  std::string target_object, target_attr;
  std::vector<std::pair<std::string, ExprPtr>> params;  // macro / call-block parameters and defaults
  Body body, else_body;
};

}  // namespace trine::jinja
