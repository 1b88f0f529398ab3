// What the golden tests cannot show: trine's own errors (each names the construct and the line),
// the bounds on work and output, and ChatFormat's use of the interpreter for a model's template.
#include <gtest/gtest.h>

#include "tokenizer/chat_format.h"
#include "tokenizer/jinja/template.h"

namespace trine {
namespace {

Status RenderText(const std::string& source, std::string* out, const jinja::RenderOptions& options = {}) {
  std::unique_ptr<jinja::Template> t;
  TRINE_RETURN_IF_ERROR(jinja::Template::Parse(source, &t));
  jinja::Object globals;
  globals.Set("messages", jinja::Value::MakeArray({}));
  return t->Render(globals, options, out);
}

std::string ErrorOf(const std::string& source, const jinja::RenderOptions& options = {}) {
  std::string out;
  const Status st = RenderText(source, &out, options);
  EXPECT_FALSE(st.ok()) << source << " rendered: " << out;
  return st.message();
}

TEST(Jinja, ParseErrorsNameTheConstructAndLine) {
  EXPECT_EQ(ErrorOf("a\n{% include 'x' %}"),
            "chat template: line 2: {% include %} is not supported: a chat template is one self-contained template");
  EXPECT_EQ(ErrorOf("{% frobnicate %}"), "chat template: line 1: unknown statement {% frobnicate %}");
  EXPECT_EQ(ErrorOf("\n\n{{ x | shout }}"), "chat template: line 3: unknown filter 'shout'");
  EXPECT_EQ(ErrorOf("{% if x is weird %}{% endif %}"), "chat template: line 1: unknown test 'weird'");
  // An unknown filter is found at parse time even in a branch that never runs (as Jinja2 does).
  EXPECT_NE(ErrorOf("{% if false %}{{ x | shout }}{% endif %}").find("unknown filter 'shout'"), std::string::npos);
  EXPECT_NE(ErrorOf("{% if true %}x").find("expected {% elif %} or {% else %} or {% endif %}"), std::string::npos);
  EXPECT_NE(ErrorOf("{{ 'abc }}").find("unterminated string literal"), std::string::npos);
  EXPECT_NE(ErrorOf("{{ x ").find("unterminated {{ expression"), std::string::npos);
  EXPECT_NE(ErrorOf("{# note").find("unterminated comment"), std::string::npos);
  EXPECT_NE(ErrorOf("{{ f(*args) }}").find("*args and **kwargs"), std::string::npos);
  EXPECT_NE(ErrorOf("{% for x in y recursive %}{% endfor %}").find("recursive for loops"), std::string::npos);
  EXPECT_NE(ErrorOf("{{ a ; b }}").find("unexpected character ';'"), std::string::npos);
  EXPECT_NE(ErrorOf("{{ x is is defined }}").find("line 1"), std::string::npos);
}

TEST(Jinja, RuntimeErrorsNameTheProblem) {
  EXPECT_NE(ErrorOf("{{ raise_exception('roles must alternate') }}").find("refused the conversation: roles must alternate"),
            std::string::npos);
  EXPECT_NE(ErrorOf("{{ nope() }}").find("'nope' is undefined"), std::string::npos);
  EXPECT_NE(ErrorOf("\n{{ 'a' + 1 }}").find("line 2: unsupported operand types for +: 'str' and 'int'"), std::string::npos);
  EXPECT_NE(ErrorOf("{{ messages.append(1) }}").find("immutable sandbox"), std::string::npos);
  EXPECT_NE(ErrorOf("{{ 'x'.format(1) }}").find("str.format() is not supported"), std::string::npos);
  EXPECT_NE(ErrorOf("{{ undefined_thing.attr }}").find("'attr' of an undefined value"), std::string::npos);
  EXPECT_NE(ErrorOf("{{ 1 // 0 }}").find("division by zero"), std::string::npos);
}

TEST(Jinja, WorkAndOutputAreBounded) {
  jinja::RenderOptions small;
  small.limits.max_output_bytes = 1 << 16;
  small.limits.max_steps = 100000;
  EXPECT_NE(ErrorOf("{% for i in range(100000000) %}{% endfor %}").find("range() longer than"), std::string::npos);
  EXPECT_NE(ErrorOf("{% for i in range(1000) %}{% for j in range(1000) %}{% endfor %}{% endfor %}", small)
                .find("steps"),
            std::string::npos);
  EXPECT_NE(ErrorOf("{{ 'x' * 100000000000 }}", small).find("MiB"), std::string::npos);
  EXPECT_NE(ErrorOf("{% for i in range(100000) %}xxxxxxxxxx{% endfor %}", small).find("MiB"), std::string::npos);
  EXPECT_NE(ErrorOf("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}").find("nested more than 64"), std::string::npos);
  EXPECT_NE(ErrorOf("{{ " + std::string(300, '(') + "1" + std::string(300, ')') + " }}").find("nested too deeply"), std::string::npos);
  EXPECT_NE(ErrorOf("{{ " + std::string(300, '[') + std::string(300, ']') + " }}").find("nested too deeply"),
            std::string::npos);
  std::string chain = "{{ 1";
  for (int i = 0; i < 1000; ++i) chain += " + 1";
  EXPECT_NE(ErrorOf(chain + " }}").find("expression nested too deeply"), std::string::npos);
  std::string shallow = "{{ 1";
  for (int i = 0; i < 300; ++i) shallow += " + 1";
  std::string out;
  ASSERT_TRUE(RenderText(shallow + " }}", &out).ok());
  EXPECT_EQ(out, "301");
}

TEST(ChatFormat, ModelTemplateIsRenderedAsJinja) {
  std::unique_ptr<ChatFormat> f;
  const std::string tmpl =
      "{{ bos_token }}{% for m in messages %}[{{ m.role | upper }}] {{ m.content | trim }}{{ eos_token }}\n{% endfor %}"
      "{% if add_generation_prompt %}[ASSISTANT] {% endif %}";
  ASSERT_TRUE(ChatFormat::ForModel(tmpl, {"<s>", "</s>"}, &f).ok());
  EXPECT_STREQ(f->name(), "jinja");
  EXPECT_TRUE(f->note().empty());
  std::string out;
  ASSERT_TRUE(f->Render({{"system", " be brief "}, {"user", "hi"}}, true, &out).ok());
  EXPECT_EQ(out, "<s>[SYSTEM] be brief</s>\n[USER] hi</s>\n[ASSISTANT] ");
  EXPECT_EQ(f->EndOfAssistantTurn(), "</s>\n");
}

TEST(ChatFormat, NoTemplateIsChatmlAndNamesStillWork) {
  std::unique_ptr<ChatFormat> f;
  ASSERT_TRUE(ChatFormat::ForModel("", {"<s>", "</s>"}, &f).ok());
  EXPECT_STREQ(f->name(), "chatml");
  ASSERT_TRUE(ChatFormat::Named("llama3", {"<|begin_of_text|>", ""}, &f).ok());
  EXPECT_STREQ(f->name(), "llama3");
  EXPECT_EQ(f->EndOfAssistantTurn(), "<|eot_id|>");
  EXPECT_FALSE(ChatFormat::Named("vicuna", {}, &f).ok());
  EXPECT_FALSE(ChatFormat::Named("{% if %}", {}, &f).ok());
}

TEST(ChatFormat, UnparsableTemplateFallsBackToTheBuiltInItsMarkersName) {
  std::unique_ptr<ChatFormat> f;
  // A ChatML template with a construct outside the subset: the built-in chatml renders it.
  const std::string tmpl = "{% include 'x' %}{{ '<|im_start|>' + m.role }}";
  ASSERT_TRUE(ChatFormat::ForModel(tmpl, {}, &f).ok());
  EXPECT_STREQ(f->name(), "chatml");
  EXPECT_NE(f->note().find("{% include %} is not supported"), std::string::npos) << f->note();
  EXPECT_NE(f->note().find("using the built-in chatml format"), std::string::npos) << f->note();
  // Unknown markers too: the error names the construct and the flag.
  const Status st = ChatFormat::ForModel("{% include 'x' %}", {}, &f);
  EXPECT_EQ(st.code(), StatusCode::kUnsupported);
  EXPECT_NE(st.message().find("{% include %}"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("--chat-template"), std::string::npos) << st.message();
}

TEST(ChatFormat, TemplateRefusalIsAnError) {
  std::unique_ptr<ChatFormat> f;
  ASSERT_TRUE(ChatFormat::ForModel("{% if messages[0].role == 'system' %}{{ raise_exception('System role not "
                                   "supported') }}{% endif %}ok",
                                   {}, &f)
                  .ok());
  std::string out;
  const Status st = f->Render({{"system", "x"}, {"user", "y"}}, true, &out);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("System role not supported"), std::string::npos);
  ASSERT_TRUE(f->Render({{"user", "y"}}, true, &out).ok());
  EXPECT_EQ(out, "ok");
}

}  // namespace
}  // namespace trine
