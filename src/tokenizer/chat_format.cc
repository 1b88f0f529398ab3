#include "tokenizer/chat_format.h"

#include "tokenizer/vocab.h"

namespace trine {
namespace {

bool LooksLikeJinja(const std::string& s) {
  return s.find("{{") != std::string::npos || s.find("{%") != std::string::npos;
}

}  // namespace

ChatFormat::SpecialTokens ChatFormat::TokensOf(const Vocab& v) {
  SpecialTokens t;
  if (v.InRange(v.bos())) t.bos = v.token(v.bos());
  if (v.InRange(v.eos())) t.eos = v.token(v.eos());
  return t;
}

Status ChatFormat::ForVocab(const Vocab& vocab, std::unique_ptr<ChatFormat>* out) {
  return ForModel(vocab.chat_template(), TokensOf(vocab), out);
}

Status ChatFormat::ForModel(const std::string& model_template, const SpecialTokens& tokens,
                            std::unique_ptr<ChatFormat>* out) {
  auto f = std::unique_ptr<ChatFormat>(new ChatFormat());
  f->tokens_ = tokens;
  if (model_template.empty()) {
    f->builtin_ = ChatTemplate::kChatml;
    *out = std::move(f);
    return Status::Ok();
  }
  const Status parsed = jinja::Template::Parse(model_template, &f->jinja_);
  if (!parsed.ok()) {
    ChatTemplate t;
    if (!DetectChatTemplate(model_template, &t).ok()) {
      return Unsupported("the model's " + parsed.message() +
                         "; choose a format with --chat-template chatml|llama3|llama2|bitnet");
    }
    f->builtin_ = t;
    f->note_ = "the model's " + parsed.message() + "; using the built-in " + ChatTemplateName(t) + " format";
  }
  *out = std::move(f);
  return Status::Ok();
}

Status ChatFormat::Named(const std::string& name_or_source, const SpecialTokens& tokens,
                         std::unique_ptr<ChatFormat>* out) {
  auto f = std::unique_ptr<ChatFormat>(new ChatFormat());
  f->tokens_ = tokens;
  if (LooksLikeJinja(name_or_source)) {
    TRINE_RETURN_IF_ERROR(jinja::Template::Parse(name_or_source, &f->jinja_));
  } else {
    ChatTemplate t;
    TRINE_RETURN_IF_ERROR(ParseChatTemplateName(name_or_source, &t));
    f->builtin_ = t;
  }
  *out = std::move(f);
  return Status::Ok();
}

const char* ChatFormat::name() const { return builtin_ ? ChatTemplateName(*builtin_) : "jinja"; }

Status ChatFormat::Render(const std::vector<ChatMessage>& messages, bool add_assistant, std::string* out) const {
  if (builtin_) {
    *out = RenderChat(*builtin_, messages, 0, add_assistant, tokens_.bos);
    return Status::Ok();
  }
  jinja::Array list;
  list.reserve(messages.size());
  for (const ChatMessage& m : messages) {
    jinja::Value msg = jinja::Value::MakeObject();
    msg.object().Set("role", jinja::Value(m.role));
    msg.object().Set("content", jinja::Value(m.content));
    list.push_back(std::move(msg));
  }
  jinja::Object globals;
  globals.Set("messages", jinja::Value::MakeArray(std::move(list)));
  globals.Set("add_generation_prompt", jinja::Value(add_assistant));
  globals.Set("bos_token", jinja::Value(tokens_.bos));
  globals.Set("eos_token", jinja::Value(tokens_.eos));
  return jinja_->Render(globals, jinja::RenderOptions(), out);
}

std::string ChatFormat::EndOfAssistantTurn() const {
  if (builtin_) return trine::EndOfAssistantTurn(*builtin_);
  // Render a one-turn exchange with a marker for the reply; what follows the marker is the turn's
  // end. Templates that refuse such an exchange (or move text around) give "".
  static const char* kMarker = "\x01trine-reply\x01";
  std::string opened, closed;
  if (!Render({{"user", "hi"}}, true, &opened).ok()) return "";
  if (!Render({{"user", "hi"}, {"assistant", kMarker}}, false, &closed).ok()) return "";
  const size_t at = closed.find(kMarker);
  if (closed.compare(0, opened.size(), opened) != 0 || at == std::string::npos || at < opened.size()) return "";
  return closed.substr(at + std::string(kMarker).size());
}

}  // namespace trine
