// libFuzzer target for chat templates: template recognition from an arbitrary Jinja string, and
// rendering of arbitrary conversations through the library and through the C API.
// Input: byte 0 picks the template (chatml, llama3, llama2, bitnet, or the model's own) and
// add_assistant; the rest is split at NUL bytes into role, content, role, content, ...
// Invariants: DetectChatTemplate never crashes and either recognises or names the fallback;
// the C API returns -(needed) for a short buffer and then exactly the library's rendering; an
// unknown role is an INVALID_ARGUMENT error, never a crash; the rendering of a conversation
// starts with the rendering of its first k messages (what `trine chat` relies on).
#include <string>
#include <vector>

#include "fuzz_util.h"
#include "tokenizer/chat_template.h"
#include "trine/trine.h"

namespace {

using trine::fuzz::Check;

const trine_model* SharedModel() {
  static const trine_model* model = [] {
    trine_model_params mp = trine_model_default_params();
    trine_model* m = trine_model_load(trine::fuzz::ModelPath("bitnet-tiny-stories-TQ2_0-f16emb.gguf").c_str(), &mp);
    Check(m != nullptr, "bundled model loads");
    return m;
  }();
  return model;
}

std::string ApplyC(const char* tmpl, const std::vector<trine_chat_message>& msgs, bool add_assistant, int32_t* rc) {
  const int32_t needed = trine_chat_apply_template(SharedModel(), tmpl, msgs.data(), msgs.size(), add_assistant, nullptr, 0);
  *rc = needed;
  if (needed == TRINE_SIZE_ERROR) return {};
  Check(needed <= 0, "size query returns -(needed) or 0");
  std::string out(static_cast<size_t>(-needed), '\0');
  if (!out.empty()) {
    Check(trine_chat_apply_template(SharedModel(), tmpl, msgs.data(), msgs.size(), add_assistant, out.data(),
                                    static_cast<int32_t>(out.size()) - 1) == needed,
          "one byte short still reports -(needed)");
  }
  *rc = trine_chat_apply_template(SharedModel(), tmpl, msgs.data(), msgs.size(), add_assistant, out.data(),
                                  static_cast<int32_t>(out.size()));
  Check(*rc == -needed, "a buffer of the reported size is enough");
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0 || size > 8192) return 0;
  const std::string rest(reinterpret_cast<const char*>(data + 1), size - 1);

  trine::ChatTemplate detected;
  const trine::Status st = trine::DetectChatTemplate(rest, &detected);
  Check(st.ok() || st.message().find("--chat-template") != std::string::npos,
        "an unrecognised template names the flag to force one");

  std::vector<std::string> parts;
  for (size_t p = 0;;) {
    const size_t q = rest.find('\0', p);
    parts.push_back(rest.substr(p, q == std::string::npos ? std::string::npos : q - p));
    if (q == std::string::npos) break;
    p = q + 1;
  }
  std::vector<trine_chat_message> msgs;
  bool roles_valid = true;
  for (size_t i = 0; i + 1 < parts.size(); i += 2) {
    msgs.push_back({parts[i].c_str(), parts[i + 1].c_str()});
    roles_valid = roles_valid && (parts[i] == "system" || parts[i] == "user" || parts[i] == "assistant");
  }
  static const char* const kNames[] = {"chatml", "llama3", "llama2", "bitnet", nullptr};
  const char* tmpl = kNames[data[0] % 5];
  const bool add_assistant = (data[0] >> 4) & 1;

  int32_t rc = 0;
  const std::string full = ApplyC(tmpl, msgs, add_assistant, &rc);
  if (!roles_valid) {
    Check(rc == TRINE_SIZE_ERROR && trine_last_status() == TRINE_ERROR_INVALID_ARGUMENT, "unknown role rejected");
    return 0;
  }
  Check(rc >= 0, "valid conversations render");
  if (tmpl == nullptr) return 0;
  trine::ChatTemplate t;
  Check(trine::ParseChatTemplateName(tmpl, &t).ok(), "known name parses");
  std::vector<trine::ChatMessage> cm;
  for (const auto& m : msgs) cm.push_back({m.role, m.content});
  char bos[64];
  const int32_t bos_len = trine_token_to_piece(SharedModel(), trine_model_token_bos(SharedModel()), bos, sizeof(bos), true);
  Check(bos_len >= 0, "BOS has a piece");
  Check(trine::RenderChat(t, cm, 0, add_assistant, std::string(bos, static_cast<size_t>(bos_len))) == full,
        "C API renders what the library renders");
  // Incremental rendering: the text of the first k messages plus the rendering of the rest from
  // k is the whole text (what a running chat sends to the model). llama2 folds a system message
  // into the next user turn, so it cannot be split while one waits for that turn.
  // (k >= 1: templates write BOS when rendering from message 0, even of an empty conversation.)
  const size_t k = cm.size() / 2;
  if (k == 0) return 0;
  if (t == trine::ChatTemplate::kLlama2) {
    bool system_waiting = false;
    for (size_t i = 0; i < k; ++i) {
      if (cm[i].role == "system") system_waiting = true;
      if (cm[i].role == "user") system_waiting = false;
    }
    if (system_waiting) return 0;
  }
  const std::string head = trine::RenderChat(t, cm, 0, false, "<s>");
  const std::vector<trine::ChatMessage> first(cm.begin(), cm.begin() + static_cast<std::ptrdiff_t>(k));
  const std::string head_k = trine::RenderChat(t, first, 0, false, "<s>");
  const std::string tail_k = trine::RenderChat(t, cm, k, false, "<s>");
  Check(head == head_k + tail_k, "incremental rendering equals whole rendering");
  return 0;
}
