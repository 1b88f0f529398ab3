// Real chat templates (tests/data/chat_templates/*.jinja, as the models ship them) rendered by
// trine's Jinja interpreter must give exactly what Python's Jinja2 gives under Hugging Face's
// settings (golden.json, written by tests/tokenizer/make_chat_template_goldens.py). Where Jinja2
// fails (raise_exception in the template, or a Python error), trine must fail too, and for
// raise_exception with the template's own message.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <sstream>

#include "tokenizer/jinja/template.h"

namespace trine {
namespace {

const std::string kDir = std::string(TRINE_TEST_DATA_DIR) + "/chat_templates/";

std::string ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

jinja::Value FromJson(const nlohmann::ordered_json& j) {
  if (j.is_null()) return jinja::Value::None();
  if (j.is_boolean()) return jinja::Value(j.get<bool>());
  if (j.is_number_integer()) return jinja::Value(j.get<int64_t>());
  if (j.is_number()) return jinja::Value(j.get<double>());
  if (j.is_string()) return jinja::Value(j.get<std::string>());
  if (j.is_array()) {
    jinja::Array a;
    for (const auto& x : j) a.push_back(FromJson(x));
    return jinja::Value::MakeArray(std::move(a));
  }
  jinja::Value o = jinja::Value::MakeObject();
  for (auto it = j.begin(); it != j.end(); ++it) o.object().Set(it.key(), FromJson(it.value()));
  return o;
}

nlohmann::ordered_json Load(const std::string& name) { return nlohmann::ordered_json::parse(ReadText(kDir + name)); }

TEST(JinjaGolden, RealTemplatesRenderAsJinja2Does) {
  const nlohmann::ordered_json spec = Load("conversations.json");
  const nlohmann::ordered_json golden = Load("golden.json");
  ASSERT_GE(golden.size(), 12u) << "the issue asks for at least 12 real templates";
  jinja::RenderOptions options;
  options.now = spec["now"].get<std::time_t>();
  int checked = 0, failures_matched = 0;
  for (auto t = golden.begin(); t != golden.end(); ++t) {
    SCOPED_TRACE(t.key());
    std::unique_ptr<jinja::Template> tmpl;
    const Status st = jinja::Template::Parse(ReadText(kDir + t.key() + ".jinja"), &tmpl);
    ASSERT_TRUE(st.ok()) << st.message();
    for (const auto& conv : spec["conversations"]) {
      for (const bool gen : {true, false}) {
        const std::string key = conv["name"].get<std::string>() + (gen ? "+gen" : "");
        SCOPED_TRACE(key);
        const nlohmann::ordered_json& want = t.value().at(key);
        jinja::Object globals;
        globals.Set("messages", FromJson(conv["messages"]));
        globals.Set("add_generation_prompt", jinja::Value(gen));
        globals.Set("bos_token", jinja::Value(spec["bos_token"].get<std::string>()));
        globals.Set("eos_token", jinja::Value(spec["eos_token"].get<std::string>()));
        if (conv.contains("tools")) globals.Set("tools", FromJson(conv["tools"]));
        std::string got;
        const Status r = tmpl->Render(globals, options, &got);
        if (want.contains("text")) {
          ASSERT_TRUE(r.ok()) << r.message();
          EXPECT_EQ(got, want["text"].get<std::string>());
        } else {
          ASSERT_FALSE(r.ok()) << "Jinja2 fails here (" << want["error"] << ") but trine rendered:\n" << got;
          if (want["raised"].get<bool>()) {
            EXPECT_NE(r.message().find(want["error"].get<std::string>()), std::string::npos) << r.message();
          }
          ++failures_matched;
        }
        ++checked;
      }
    }
  }
  std::printf("[ jinja ] %d renderings of %zu templates match Jinja2 (%d of them errors)\n", checked, golden.size(),
              failures_matched);
}

// One language feature per snippet (whitespace rules, literals, operators, filters, tests, loops,
// scoping, macros, methods, errors), each rendered by Jinja2 into golden_snippets.json.
TEST(JinjaGolden, SnippetsRenderAsJinja2Does) {
  const nlohmann::ordered_json spec = Load("snippets.json");
  const nlohmann::ordered_json golden = Load("golden_snippets.json");
  ASSERT_EQ(golden.size(), spec["snippets"].size()) << "golden_snippets.json is stale: run the script";
  jinja::Object globals;
  for (auto it = spec["context"].begin(); it != spec["context"].end(); ++it) globals.Set(it.key(), FromJson(it.value()));
  for (const auto& want : golden) {
    const std::string source = want["source"].get<std::string>();
    SCOPED_TRACE(source);
    std::unique_ptr<jinja::Template> tmpl;
    Status st = jinja::Template::Parse(source, &tmpl);
    std::string got;
    if (st.ok()) st = tmpl->Render(globals, jinja::RenderOptions(), &got);
    if (want.contains("text")) {
      ASSERT_TRUE(st.ok()) << st.message();
      EXPECT_EQ(got, want["text"].get<std::string>());
    } else {
      EXPECT_FALSE(st.ok()) << "Jinja2 fails here (" << want["error"] << ") but trine rendered: " << got;
      if (want["raised"].get<bool>()) {
        EXPECT_NE(st.message().find(want["error"].get<std::string>()), std::string::npos) << st.message();
      }
    }
  }
}

}  // namespace
}  // namespace trine
