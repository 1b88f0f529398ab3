// ChatFormat: how a conversation becomes prompt text. A model's own tokenizer.chat_template is a
// Jinja template, rendered by the interpreter in jinja/ as Hugging Face renders it; the built-in
// formats of chat_template.h (chatml, llama3, llama2, bitnet) stay available by name
// (--chat-template NAME), and a template's text can be given instead (--chat-template-file).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/jinja/template.h"

namespace trine {

class Vocab;

class ChatFormat {
 public:
  // The texts templates see as bos_token and eos_token.
  struct SpecialTokens {
    std::string bos, eos;
  };

  // The model's own template. No template at all means chatml (llama.cpp's default). A template
  // the interpreter cannot parse falls back to the built-in its markers identify, with note()
  // saying so; with no such built-in the error names the construct and --chat-template.
  static Status ForModel(const std::string& model_template, const SpecialTokens& tokens,
                         std::unique_ptr<ChatFormat>* out);
  static Status ForVocab(const Vocab& vocab, std::unique_ptr<ChatFormat>* out);
  // A built-in's name, or a Jinja template's text (anything containing "{{" or "{%").
  static Status Named(const std::string& name_or_source, const SpecialTokens& tokens, std::unique_ptr<ChatFormat>* out);
  static SpecialTokens TokensOf(const Vocab& vocab);

  // "jinja" for a Jinja template, else the built-in's name ("chatml", ...). Static storage.
  const char* name() const;
  // Why the model's template was replaced by a built-in; empty when it was not.
  const std::string& note() const { return note_; }

  // The whole conversation, with the assistant's turn opened when `add_assistant`. Errors:
  // raise_exception() in the template (its message), or a template error naming the construct.
  Status Render(const std::vector<ChatMessage>& messages, bool add_assistant, std::string* out) const;
  // The text the format writes after an assistant reply (e.g. "<|im_end|>\n"); "" when the
  // template does not render a one-turn exchange.
  std::string EndOfAssistantTurn() const;

 private:
  ChatFormat() = default;

  std::optional<ChatTemplate> builtin_;
  std::unique_ptr<jinja::Template> jinja_;
  SpecialTokens tokens_;
  std::string note_;
};

}  // namespace trine
