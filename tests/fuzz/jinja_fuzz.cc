// libFuzzer target for the Jinja interpreter (src/tokenizer/jinja): an arbitrary template source is
// parsed and, when it parses, rendered with a conversation (messages with role, content and a
// tool call; tools; bos/eos; add_generation_prompt from the input's last byte) under tight limits.
// Invariants: no crash, hang or unbounded memory; every failure is a Status whose message is
// non-empty; a rendering never exceeds the output limit; rendering twice gives the same text.
#include <string>

#include "fuzz_util.h"
#include "tokenizer/jinja/template.h"

namespace {

using trine::fuzz::Check;
using trine::jinja::Value;

Value Message(const char* role, const char* content) {
  Value m = Value::MakeObject();
  m.object().Set("role", Value(role));
  m.object().Set("content", Value(content));
  return m;
}

trine::jinja::Object Globals(bool add_generation_prompt) {
  Value call = Value::MakeObject();
  Value fn = Value::MakeObject();
  fn.object().Set("name", Value("get_weather"));
  Value args = Value::MakeObject();
  args.object().Set("city", Value("Paris"));
  fn.object().Set("arguments", args);
  call.object().Set("id", Value("call12345"));
  call.object().Set("type", Value("function"));
  call.object().Set("function", fn);
  Value assistant = Message("assistant", "");
  assistant.object().Set("tool_calls", Value::MakeArray({call}));
  trine::jinja::Object g;
  g.Set("messages", Value::MakeArray({Message("system", "Be brief."), Message("user", " hi\n"),
                                      Message("assistant", "<think>x</think>Hello"), assistant,
                                      Message("tool", "{\"t\": 21.5}"), Message("user", "thanks")}));
  g.Set("tools", Value::MakeArray({call}));
  g.Set("add_generation_prompt", Value(add_generation_prompt));
  g.Set("bos_token", Value("<s>"));
  g.Set("eos_token", Value("</s>"));
  return g;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0 || size > 16384) return 0;
  const std::string source(reinterpret_cast<const char*>(data), size);
  std::unique_ptr<trine::jinja::Template> t;
  const trine::Status parsed = trine::jinja::Template::Parse(source, &t);
  if (!parsed.ok()) {
    Check(!parsed.message().empty(), "a parse error has a message");
    return 0;
  }
  trine::jinja::RenderOptions options;
  options.limits.max_output_bytes = 1 << 20;
  options.limits.max_steps = 200000;
  options.limits.max_range = 10000;
  options.now = 1785067200;
  const trine::jinja::Object globals = Globals((data[size - 1] & 1) != 0);
  std::string out, again;
  const trine::Status st = t->Render(globals, options, &out);
  if (!st.ok()) {
    Check(!st.message().empty(), "a render error has a message");
    Check(out.empty(), "a failed render leaves no partial text");
    return 0;
  }
  Check(out.size() <= options.limits.max_output_bytes, "output stays under the limit");
  Check(t->Render(globals, options, &again).ok() && again == out, "rendering is deterministic");
  return 0;
}
