// A Jinja template interpreter for the chat templates GGUF files carry in tokenizer.chat_template.
//
// No C++ Jinja library is packaged in Debian, and the templates are written for Python's Jinja2 as
// Hugging Face runs it (transformers' chat-template environment): trim_blocks and lstrip_blocks on,
// loop controls, `tojson` without HTML escaping, `raise_exception` and `strftime_now` globals, an
// immutable sandbox (lists and dicts cannot be modified, so no `.append`). This interpreter
// implements that language subset: statements if/elif/else, for (loop variables, else, inline
// filter, break/continue), set (plain, tuple, namespace attribute, block), macro (with defaults and
// caller), call, filter blocks, raw, generation; Python expressions with Jinja precedence,
// slicing, string/list/dict methods, and the filters and tests templates use. Anything else is an
// error naming the construct, found when the template is parsed where possible (unknown
// statements, filters and tests) and otherwise when it is rendered; work is bounded (steps,
// output size, nesting) so no input can hang or exhaust memory.
//
// Differences from Python that a template could observe: str.upper()/lower()/title() change ASCII
// letters only; string formatting with % supports %s, %d, %i, %f and %%.
#pragma once

#include <cstdint>
#include <ctime>
#include <memory>
#include <string>

#include "core/status.h"
#include "tokenizer/jinja/ast.h"
#include "tokenizer/jinja/value.h"

namespace trine::jinja {

struct RenderLimits {
  size_t max_output_bytes = size_t{64} << 20;  // also bounds every string a template builds
  uint64_t max_steps = 50'000'000;            // statements + expressions evaluated
  int max_call_depth = 64;                     // nested macro calls
  int64_t max_range = 1'000'000;               // elements one range() may produce
};

struct RenderOptions {
  RenderLimits limits;
  // strftime_now() formats this time (seconds since the epoch, local time); 0 means now.
  std::time_t now = 0;
};

class Template {
 public:
  // Errors (kInvalidArgument) name the construct and the line: "line 3: unknown filter 'foo'".
  static Status Parse(const std::string& source, std::unique_ptr<Template>* out);

  // Renders with `globals` as the template's variables (messages, add_generation_prompt,
  // bos_token, ...). A raise_exception() in the template is an error carrying its message.
  Status Render(const Object& globals, const RenderOptions& options, std::string* out) const;

 private:
  Body body_;
};

}  // namespace trine::jinja
