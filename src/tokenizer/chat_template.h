// Chat templates: a few named formats (no Jinja), recognised from tokenizer.chat_template by
// content or forced by name, rendered one turn at a time so a chat keeps its history in the KV
// cache and only appends the new tokens.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"

namespace trine {

enum class ChatTemplate { kChatml, kLlama3, kLlama2, kBitnet };

struct ChatMessage {
  std::string role;  // "system", "user" or "assistant"
  std::string content;
};

// Names accepted by --chat-template: chatml, llama3, llama2, bitnet.
Status ParseChatTemplateName(const std::string& name, ChatTemplate* out);
const char* ChatTemplateName(ChatTemplate t);
// Recognises a Jinja template by its markers; an empty template means chatml (llama.cpp's
// default). Unknown non-empty templates give kUnsupported naming the fallback flag.
Status DetectChatTemplate(const std::string& jinja, ChatTemplate* out);

// Renders `messages[from..]` as they continue a conversation of which messages[0..from) were
// already rendered, and opens the assistant's turn when `add_assistant`. `bos` is the BOS
// token text, put at the very start (from == 0) by templates that want it in the text.
std::string RenderChat(ChatTemplate t, const std::vector<ChatMessage>& messages, size_t from, bool add_assistant,
                       const std::string& bos);
// Text the template puts after an assistant reply (the end-of-turn marker), e.g. "<|im_end|>\n".
std::string EndOfAssistantTurn(ChatTemplate t);

}  // namespace trine
