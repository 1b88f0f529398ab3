// Chat template rendering for chatml, Llama 3, Llama 2 and BitNet b1.58 2B4T.
#include "tokenizer/chat_template.h"

namespace trine {
namespace {

std::string Trim(const std::string& s) {
  const char* ws = " \t\n\r";
  const size_t b = s.find_first_not_of(ws);
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(ws) - b + 1);
}

std::string Capitalised(const std::string& role) {
  if (role.empty()) return role;
  std::string r = role;
  r[0] = static_cast<char>(r[0] >= 'a' && r[0] <= 'z' ? r[0] - 'a' + 'A' : r[0]);
  return r;
}

}  // namespace

Status ParseChatTemplateName(const std::string& name, ChatTemplate* out) {
  if (name == "chatml") {
    *out = ChatTemplate::kChatml;
  } else if (name == "llama3" || name == "llama-3") {
    *out = ChatTemplate::kLlama3;
  } else if (name == "llama2" || name == "llama-2") {
    *out = ChatTemplate::kLlama2;
  } else if (name == "bitnet" || name == "bitnet-b1.58") {
    *out = ChatTemplate::kBitnet;
  } else {
    return InvalidArgument("unknown chat template '" + name + "' (known: chatml, llama3, llama2, bitnet)");
  }
  return Status::Ok();
}

const char* ChatTemplateName(ChatTemplate t) {
  switch (t) {
    case ChatTemplate::kChatml: return "chatml";
    case ChatTemplate::kLlama3: return "llama3";
    case ChatTemplate::kLlama2: return "llama2";
    case ChatTemplate::kBitnet: return "bitnet";
  }
  return "?";
}

Status DetectChatTemplate(const std::string& jinja, ChatTemplate* out) {
  if (jinja.empty()) {
    *out = ChatTemplate::kChatml;
  } else if (jinja.find("<|start_header_id|>") != std::string::npos) {
    *out = ChatTemplate::kLlama3;
  } else if (jinja.find("<|im_start|>") != std::string::npos) {
    *out = ChatTemplate::kChatml;
  } else if (jinja.find("[INST]") != std::string::npos) {
    *out = ChatTemplate::kLlama2;
  } else if (jinja.find("Assistant: ") != std::string::npos && jinja.find("<|eot_id|>") != std::string::npos) {
    *out = ChatTemplate::kBitnet;
  } else {
    return Unsupported("the model's chat template is not one trine knows; choose one with --chat-template "
                       "(chatml, llama3, llama2, bitnet)");
  }
  return Status::Ok();
}

std::string RenderChat(ChatTemplate t, const std::vector<ChatMessage>& msgs, size_t from, bool add_assistant,
                       const std::string& bos) {
  std::string out;
  switch (t) {
    case ChatTemplate::kChatml:
      for (size_t i = from; i < msgs.size(); ++i) {
        out += "<|im_start|>" + msgs[i].role + "\n" + msgs[i].content + "<|im_end|>\n";
      }
      if (add_assistant) out += "<|im_start|>assistant\n";
      break;
    case ChatTemplate::kLlama3:
      if (from == 0) out += bos;
      for (size_t i = from; i < msgs.size(); ++i) {
        out += "<|start_header_id|>" + msgs[i].role + "<|end_header_id|>\n\n" + Trim(msgs[i].content) + "<|eot_id|>";
      }
      if (add_assistant) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
      break;
    case ChatTemplate::kLlama2: {
      // <s>[INST] <<SYS>>\n{system}\n<</SYS>>\n\n{user} [/INST] {assistant} </s>
      std::string system;
      size_t i = from;
      for (; i < msgs.size(); ++i) {
        const ChatMessage& m = msgs[i];
        if (m.role == "system") {
          system = m.content;
        } else if (m.role == "user") {
          out += bos + "[INST] ";
          if (!system.empty()) out += "<<SYS>>\n" + system + "\n<</SYS>>\n\n";
          system.clear();
          out += Trim(m.content) + " [/INST]";
        } else {
          out += " " + Trim(m.content) + " </s>";
        }
      }
      break;
    }
    case ChatTemplate::kBitnet:
      if (from == 0) out += bos;
      for (size_t i = from; i < msgs.size(); ++i) {
        out += Capitalised(msgs[i].role) + ": " + Trim(msgs[i].content) + "<|eot_id|>";
      }
      if (add_assistant) out += "Assistant: ";
      break;
  }
  return out;
}

std::string EndOfAssistantTurn(ChatTemplate t) {
  switch (t) {
    case ChatTemplate::kChatml: return "<|im_end|>\n";
    case ChatTemplate::kLlama3: return "<|eot_id|>";
    case ChatTemplate::kLlama2: return " </s>";
    case ChatTemplate::kBitnet: return "<|eot_id|>";
  }
  return "";
}

}  // namespace trine
