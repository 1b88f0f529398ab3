// The C API (include/trine/trine.h) over the C++ internals: argument checks, Status -> trine_status,
// and the only place where C++ exceptions (std::bad_alloc above all) are caught. Must not be
// included by the internals; only tools/ and embedders see trine.h.
#include "trine/trine.h"

#include <algorithm>
#include <climits>
#include <cstddef>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <unordered_set>
#include <vector>

#include "model/model.h"
#include "profiler/plan_load.h"
#include "runtime/context.h"
#include "runtime/generate.h"
#include "sampler/sampler.h"
#include "tokenizer/chat_format.h"
#include "tokenizer/tokenizer.h"

#if defined(TRINE_PROJECT_VERSION_MAJOR)
static_assert(TRINE_PROJECT_VERSION_MAJOR == TRINE_VERSION_MAJOR &&
                  TRINE_PROJECT_VERSION_MINOR == TRINE_VERSION_MINOR &&
                  TRINE_PROJECT_VERSION_PATCH == TRINE_VERSION_PATCH,
              "trine.h's TRINE_VERSION_* must match project(trine VERSION ...) in CMakeLists.txt");
#endif

// ---- Handles ------------------------------------------------------------------------------------

namespace {

// Everything a trine_model handle shares with its contexts; immutable after load.
struct ModelState {
  std::unique_ptr<trine::Model> model;
  std::unique_ptr<trine::Tokenizer> tokenizer;  // null when the vocabulary has no usable tokenizer
  trine::Status tokenizer_status;               // why tokenizer is null
  std::string desc;
  std::string plan_summary;  // "" without a plan
  uint64_t size_bytes = 0;
  uint64_t n_params = 0;
};

}  // namespace

struct trine_model {
  std::shared_ptr<const ModelState> state;
};

struct trine_context {
  std::shared_ptr<const ModelState> model;  // keeps the weights alive while the context lives
  std::unique_ptr<trine::Context> ctx;
  int n_logits = 0;  // rows of logits of the last decode; 0 after kv_clear / kv_trim / a failure
};

struct trine_batch {
  trine::Batch batch;
  int32_t capacity = 0;
};

struct trine_sampler {
  explicit trine_sampler(const trine::SamplerParams& p) : sampler(p) {}
  trine::Sampler sampler;
};

namespace {

// ---- Errors -------------------------------------------------------------------------------------

// Fixed buffers, so that recording an error never allocates (it also reports out-of-memory).
thread_local char t_error[2048];
thread_local trine_status t_status = TRINE_OK;

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
void SetErrorF(trine_status status, const char* fmt, ...) {
  t_status = status;
  va_list ap;
  va_start(ap, fmt);
  const int n = std::vsnprintf(t_error, sizeof(t_error), fmt, ap);
  va_end(ap);
  if (n >= static_cast<int>(sizeof(t_error))) std::memcpy(t_error + sizeof(t_error) - 4, "...", 4);
}

trine_status ToStatus(trine::StatusCode code) {
  switch (code) {
    case trine::StatusCode::kOk: return TRINE_OK;
    case trine::StatusCode::kInvalidArgument: return TRINE_ERROR_INVALID_ARGUMENT;
    case trine::StatusCode::kInvalidFile: return TRINE_ERROR_INVALID_FILE;
    case trine::StatusCode::kIoError: return TRINE_ERROR_IO;
    case trine::StatusCode::kUnsupported: return TRINE_ERROR_UNSUPPORTED;
    case trine::StatusCode::kOutOfMemory: return TRINE_ERROR_OUT_OF_MEMORY;
    case trine::StatusCode::kCancelled: return TRINE_ERROR_CANCELLED;
    case trine::StatusCode::kInternal: return TRINE_ERROR_INTERNAL;
    // A full queue is a resource limit of the moment (the C API has no scheduler yet).
    case trine::StatusCode::kUnavailable: return TRINE_ERROR_OUT_OF_MEMORY;
  }
  return TRINE_ERROR_INTERNAL;
}

// Records a failed internal Status (its message verbatim) and returns its trine_status.
trine_status Fail(const trine::Status& st) {
  const trine_status s = ToStatus(st.code());
  SetErrorF(s == TRINE_OK ? TRINE_ERROR_INTERNAL : s, "%s", st.message().c_str());
  return s == TRINE_OK ? TRINE_ERROR_INTERNAL : s;
}

trine_status InvalidArg(const char* fn, const char* what) {
  SetErrorF(TRINE_ERROR_INVALID_ARGUMENT, "%s: %s", fn, what);
  return TRINE_ERROR_INVALID_ARGUMENT;
}

// Runs `body` and turns any escaping exception into an error return; nothing propagates to C.
template <class R, class F>
R Guard(const char* fn, R on_error, F&& body) noexcept {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    SetErrorF(TRINE_ERROR_OUT_OF_MEMORY, "%s: out of memory", fn);
  } catch (const std::exception& e) {
    SetErrorF(TRINE_ERROR_INTERNAL, "%s: internal error: %s", fn, e.what());
  } catch (...) {
    SetErrorF(TRINE_ERROR_INTERNAL, "%s: internal error: unknown exception", fn);
  }
  return on_error;
}

// The int32 "size" functions return this for errors other than a too-small buffer.
constexpr int32_t kSizeError = TRINE_SIZE_ERROR;

// ---- Logging ------------------------------------------------------------------------------------

std::mutex g_log_mu;
trine_log_callback g_log_callback = nullptr;
void* g_log_user_data = nullptr;

void Log(trine_log_level level, const std::string& message) {
  trine_log_callback cb;
  void* ud;
  {
    std::lock_guard<std::mutex> lock(g_log_mu);
    cb = g_log_callback;
    ud = g_log_user_data;
  }
  if (cb) {
    cb(level, message.c_str(), ud);
  } else if (level >= TRINE_LOG_WARN) {
    std::fprintf(stderr, "trine: %s: %s\n", level == TRINE_LOG_WARN ? "warning" : "error", message.c_str());
  }
}

// ---- Helpers ------------------------------------------------------------------------------------

bool CheckStructSize(const char* fn, size_t got, size_t want, const char* type) {
  if (got == want) return true;
  SetErrorF(TRINE_ERROR_INVALID_ARGUMENT, "%s: params->struct_size is %zu, expected sizeof(%s) = %zu", fn, got, type,
            want);
  return false;
}

// A trine_kv_type field as trine::KvType; false (INVALID_ARGUMENT set) for any other value. Read
// as an integer: C callers may store any int there, and loading a value outside the enumerators
// through the C++ enum type would be undefined.
bool KvTypeFromC(const char* fn, const trine_kv_type* field, const char* name, trine::KvType* out) {
  static_assert(sizeof(trine_kv_type) == sizeof(int32_t), "trine_kv_type is int-sized in C and C++");
  int32_t v = 0;
  std::memcpy(&v, field, sizeof(v));
  switch (v) {
    case TRINE_KV_F16:
      *out = trine::KvType::kF16;
      return true;
    case TRINE_KV_F32:
      *out = trine::KvType::kF32;
      return true;
    case TRINE_KV_Q8_0:
      *out = trine::KvType::kQ8_0;
      return true;
    case TRINE_KV_Q4_0:
      *out = trine::KvType::kQ4_0;
      return true;
    default:
      SetErrorF(TRINE_ERROR_INVALID_ARGUMENT, "%s: %s %d is not TRINE_KV_F16, TRINE_KV_F32, TRINE_KV_Q8_0 or TRINE_KV_Q4_0",
                fn, name, v);
      return false;
  }
}

// Writes `text` into (buf, size) by the "too small -> -needed" convention.
int32_t WriteText(const char* fn, const std::string& text, char* buf, int32_t size) {
  if (size < 0) return InvalidArg(fn, "size is negative"), kSizeError;
  if (buf == nullptr && size > 0) return InvalidArg(fn, "buf is NULL but size > 0"), kSizeError;
  if (text.size() > static_cast<size_t>(INT32_MAX)) {
    SetErrorF(TRINE_ERROR_UNSUPPORTED, "%s: text of %zu bytes is too long for an int32_t length", fn, text.size());
    return kSizeError;
  }
  const int32_t len = static_cast<int32_t>(text.size());
  if (len > size) {
    SetErrorF(TRINE_ERROR_BUFFER_TOO_SMALL, "%s: the text needs %d bytes, the buffer holds %d", fn, len, size);
    return -len;
  }
  if (len > 0) std::memcpy(buf, text.data(), static_cast<size_t>(len));
  if (len < size) buf[len] = '\0';
  return len;
}

const ModelState* ModelOf(const char* fn, const trine_model* model) {
  if (model == nullptr || !model->state) {
    InvalidArg(fn, "model is NULL");
    return nullptr;
  }
  return model->state.get();
}

const trine::Tokenizer* TokenizerOf(const char* fn, const trine_model* model) {
  const ModelState* m = ModelOf(fn, model);
  if (m == nullptr) return nullptr;
  if (!m->tokenizer) {
    Fail(m->tokenizer_status);  // the load-time message, as is: it names the file and the cause
    return nullptr;
  }
  return m->tokenizer.get();
}

// Row `i` of the context's logits (-1: the last), or null with the error set.
const float* LogitsRow(const char* fn, trine_context* ctx, int32_t i) {
  if (ctx == nullptr) return InvalidArg(fn, "ctx is NULL"), nullptr;
  if (ctx->n_logits == 0) {
    InvalidArg(fn, "no logits: nothing was decoded since the context was created or its KV cache cleared/trimmed");
    return nullptr;
  }
  const int32_t row = i == -1 ? ctx->n_logits - 1 : i;
  if (row < 0 || row >= ctx->n_logits) {
    SetErrorF(TRINE_ERROR_INVALID_ARGUMENT, "%s: logits row %d is out of range [0, %d) (or -1 for the last)", fn, i,
              ctx->n_logits);
    return nullptr;
  }
  return ctx->ctx->logits(row);
}

std::string HumanCount(uint64_t n) {
  char buf[32];
  if (n >= 1000000000ull) {
    std::snprintf(buf, sizeof(buf), "%.1fB", static_cast<double>(n) / 1e9);
  } else if (n >= 1000000ull) {
    std::snprintf(buf, sizeof(buf), "%.1fM", static_cast<double>(n) / 1e6);
  } else if (n >= 1000ull) {
    std::snprintf(buf, sizeof(buf), "%.1fK", static_cast<double>(n) / 1e3);
  } else {
    std::snprintf(buf, sizeof(buf), "%llu", static_cast<unsigned long long>(n));
  }
  return buf;
}

// "llama 4.5M params, 4 layers, n_embd 256, mostly TQ2_0": the type is the one of most bytes
// among the matrices of the layers (embeddings are often kept in a wider type).
std::string Describe(const trine::Model& model, uint64_t n_params) {
  std::vector<std::pair<uint64_t, std::string>> by_type;
  for (const trine::GgufTensorInfo& t : model.file().tensors()) {
    if (t.n_dims < 2 || t.name.rfind("blk.", 0) != 0) continue;
    const std::string name = trine::TypeName(t.type);
    auto it = std::find_if(by_type.begin(), by_type.end(), [&](const auto& p) { return p.second == name; });
    if (it == by_type.end()) {
      by_type.emplace_back(t.n_bytes, name);
    } else {
      it->first += t.n_bytes;
    }
  }
  std::string mostly;
  uint64_t best = 0;
  for (const auto& p : by_type) {
    if (p.first > best) {
      best = p.first;
      mostly = p.second;
    }
  }
  for (char& c : mostly) c = static_cast<char>(c >= 'a' && c <= 'z' ? c - 'a' + 'A' : c);
  const trine::ModelConfig& c = model.config();
  std::string d = c.arch_name + " " + HumanCount(n_params) + " params, " + std::to_string(c.n_layer) + " layers, n_embd " +
                  std::to_string(c.n_embd);
  if (!mostly.empty()) d += ", mostly " + mostly;
  return d;
}

// The format `tmpl` names (a built-in's name or a Jinja template's text), or the model's own.
bool ResolveChatFormat(const char* fn, const trine_model* model, const char* tmpl,
                       std::unique_ptr<trine::ChatFormat>* out) {
  trine::Status st;
  const ModelState* m = model != nullptr ? ModelOf(fn, model) : nullptr;
  if (model != nullptr && m == nullptr) return false;
  trine::ChatFormat::SpecialTokens tokens;
  if (m != nullptr) tokens = trine::ChatFormat::TokensOf(m->model->vocab());
  if (tmpl != nullptr) {
    st = trine::ChatFormat::Named(tmpl, tokens, out);
  } else if (m == nullptr) {
    InvalidArg(fn, "model and tmpl are both NULL (give a template name or a model)");
    return false;
  } else {
    st = trine::ChatFormat::ForModel(m->model->vocab().chat_template(), tokens, out);
  }
  if (!st.ok()) {
    Fail(st);
    return false;
  }
  return true;
}

// ---- Live handles -------------------------------------------------------------------------------

// The handles this library created and has not freed, one set per type. Only the *_free functions
// consult it (a lock and a hash lookup, cheap next to freeing a model): freeing a handle twice, or
// a pointer that is not a live handle of that type, is reported and ignored instead of corrupting
// the heap. Other calls on a freed handle stay undefined, as the header says.
template <class Handle>
class LiveHandles {
 public:
  Handle* Add(Handle* h) {
    std::lock_guard<std::mutex> lock(mu_);
    live_.insert(h);
    return h;
  }
  // True when h was live (it no longer is).
  bool Remove(Handle* h) {
    std::lock_guard<std::mutex> lock(mu_);
    return live_.erase(h) == 1;
  }

 private:
  std::mutex mu_;
  std::unordered_set<Handle*> live_;
};

LiveHandles<trine_model>& LiveModels() {
  static auto* live = new LiveHandles<trine_model>;  // never destroyed: frees may run at exit
  return *live;
}
LiveHandles<trine_context>& LiveContexts() {
  static auto* live = new LiveHandles<trine_context>;
  return *live;
}
LiveHandles<trine_batch>& LiveBatches() {
  static auto* live = new LiveHandles<trine_batch>;
  return *live;
}
LiveHandles<trine_sampler>& LiveSamplers() {
  static auto* live = new LiveHandles<trine_sampler>;
  return *live;
}

// Deletes h when it is a live handle; otherwise records INVALID_ARGUMENT and logs an error.
template <class Handle>
void FreeHandle(const char* fn, const char* type, LiveHandles<Handle>& live, Handle* h) {
  if (h == nullptr) return;
  if (!live.Remove(h)) {
    SetErrorF(TRINE_ERROR_INVALID_ARGUMENT, "%s: %p is not a live %s (freed twice?); ignored", fn,
              static_cast<void*>(h), type);
    Log(TRINE_LOG_ERROR, t_error);
    return;
  }
  delete h;
}

// True when seq_id names one of ctx's sequences; INVALID_ARGUMENT set otherwise.
bool SeqInRange(const char* fn, const trine_context* ctx, int32_t seq_id) {
  if (seq_id >= 0 && seq_id < ctx->ctx->n_seq_max()) return true;
  SetErrorF(TRINE_ERROR_INVALID_ARGUMENT, "%s: seq_id %d is out of range [0, %d) (n_seq_max)", fn, seq_id,
            ctx->ctx->n_seq_max());
  return false;
}

}  // namespace

extern "C" {

// ---- Library, errors, logging -------------------------------------------------------------------

#define TRINE_STR2(x) #x
#define TRINE_STR(x) TRINE_STR2(x)

const char* trine_version(void) {
  return TRINE_STR(TRINE_VERSION_MAJOR) "." TRINE_STR(TRINE_VERSION_MINOR) "." TRINE_STR(TRINE_VERSION_PATCH);
}

const char* trine_status_string(trine_status status) {
  // Read as an integer: C callers may pass any int, and loading a value outside the enumerators
  // through the C++ enum type would be undefined (UBSan's -fsanitize=enum flags it).
  int32_t code = 0;
  static_assert(sizeof(status) == sizeof(code), "trine_status is int-sized in C and C++");
  std::memcpy(&code, &status, sizeof(code));
  switch (code) {
    case TRINE_OK: return "TRINE_OK";
    case TRINE_ERROR_INVALID_ARGUMENT: return "TRINE_ERROR_INVALID_ARGUMENT";
    case TRINE_ERROR_INVALID_FILE: return "TRINE_ERROR_INVALID_FILE";
    case TRINE_ERROR_IO: return "TRINE_ERROR_IO";
    case TRINE_ERROR_UNSUPPORTED: return "TRINE_ERROR_UNSUPPORTED";
    case TRINE_ERROR_OUT_OF_MEMORY: return "TRINE_ERROR_OUT_OF_MEMORY";
    case TRINE_ERROR_CANCELLED: return "TRINE_ERROR_CANCELLED";
    case TRINE_ERROR_INTERNAL: return "TRINE_ERROR_INTERNAL";
    case TRINE_ERROR_BUFFER_TOO_SMALL: return "TRINE_ERROR_BUFFER_TOO_SMALL";
  }
  return "unknown status";
}

const char* trine_last_error(void) { return t_error; }

trine_status trine_last_status(void) { return t_status; }

void trine_log_set(trine_log_callback callback, void* user_data) {
  std::lock_guard<std::mutex> lock(g_log_mu);
  g_log_callback = callback;
  g_log_user_data = user_data;
}

// ---- Model --------------------------------------------------------------------------------------

trine_model_params trine_model_default_params(void) {
  trine_model_params p;
  std::memset(&p, 0, sizeof(p));
  p.struct_size = sizeof(p);
  p.progress_callback = nullptr;
  p.progress_user_data = nullptr;
  p.use_mmap = true;
  p.mem_budget_bytes = 0;
  p.plan_path = nullptr;
  p.auto_plan = false;
  p.no_plan_cache = false;
  p.mlock = false;
  p.plan_n_ctx = 0;
  p.plan_n_threads = 0;
  p.plan_kv_type = TRINE_KV_F16;
  return p;
}

trine_model* trine_model_load(const char* path, const trine_model_params* params) {
  static const char* fn = "trine_model_load";
  return Guard(fn, static_cast<trine_model*>(nullptr), [&]() -> trine_model* {
    if (path == nullptr) return InvalidArg(fn, "path is NULL"), nullptr;
    if (params == nullptr) return InvalidArg(fn, "params is NULL (use trine_model_default_params())"), nullptr;
    if (!CheckStructSize(fn, params->struct_size, sizeof(trine_model_params), "trine_model_params")) return nullptr;
    trine::ModelLoadOptions lo;
    lo.use_mmap = params->use_mmap;
    if (params->progress_callback != nullptr) {
      const trine_progress_callback cb = params->progress_callback;
      void* ud = params->progress_user_data;
      lo.progress = [cb, ud](float f) { return cb(f, ud); };
    }
    if (params->plan_n_ctx < 0) return InvalidArg(fn, "params->plan_n_ctx is negative"), nullptr;
    if (params->plan_n_threads < 0) return InvalidArg(fn, "params->plan_n_threads is negative"), nullptr;
    trine::profiler::PlanRequest req;
    req.mem_budget = params->mem_budget_bytes;
    req.auto_plan = params->auto_plan;
    if (params->plan_path != nullptr) req.plan_path = params->plan_path;
    req.no_cache = params->no_plan_cache;
    req.mlock = params->mlock;
    req.n_ctx = params->plan_n_ctx;
    req.n_threads = params->plan_n_threads;
    if (!KvTypeFromC(fn, &params->plan_kv_type, "params->plan_kv_type", &req.kv_type)) return nullptr;
    if (params->progress_callback != nullptr) {
      // A profile at load (auto_plan) reports through the same callback: a second pass 0 -> 1.
      const trine_progress_callback cb = params->progress_callback;
      void* ud = params->progress_user_data;
      req.progress = [cb, ud](float f, const std::string&) { return cb(f, ud); };
    }
    auto state = std::make_shared<ModelState>();
    trine::profiler::PlanOutcome outcome;
    trine::Status st = trine::profiler::LoadModelWithPlan(path, lo, req, &state->model, &outcome);
    if (!st.ok()) return Fail(st), nullptr;
    if (outcome.active) {
      state->plan_summary = outcome.summary;
      Log(TRINE_LOG_INFO, std::string(path) + ": " + outcome.summary);
    }
    state->tokenizer_status = trine::Tokenizer::Create(state->model->shared_vocab(), &state->tokenizer);
    if (!state->tokenizer_status.ok()) {
      Log(TRINE_LOG_WARN, std::string(path) + ": no tokenizer: " + state->tokenizer_status.message());
    }
    for (const trine::GgufTensorInfo& t : state->model->file().tensors()) {
      state->size_bytes += t.n_bytes;
      state->n_params += static_cast<uint64_t>(t.n_elems);
    }
    state->desc = Describe(*state->model, state->n_params);
    Log(TRINE_LOG_INFO, std::string(path) + ": " + state->desc);
    auto* handle = new trine_model;
    handle->state = std::move(state);
    return LiveModels().Add(handle);
  });
}

void trine_model_free(trine_model* model) { FreeHandle("trine_model_free", "trine_model", LiveModels(), model); }

const char* trine_model_plan_summary(const trine_model* model) {
  const ModelState* m = ModelOf("trine_model_plan_summary", model);
  return m ? m->plan_summary.c_str() : nullptr;
}

int32_t trine_model_n_vocab(const trine_model* model) {
  const ModelState* m = ModelOf("trine_model_n_vocab", model);
  return m ? m->model->config().n_vocab : TRINE_ERROR_INVALID_ARGUMENT;
}

int32_t trine_model_n_ctx_train(const trine_model* model) {
  const ModelState* m = ModelOf("trine_model_n_ctx_train", model);
  return m ? m->model->config().n_ctx_train : TRINE_ERROR_INVALID_ARGUMENT;
}

int32_t trine_model_n_embd(const trine_model* model) {
  const ModelState* m = ModelOf("trine_model_n_embd", model);
  return m ? m->model->config().n_embd : TRINE_ERROR_INVALID_ARGUMENT;
}

int32_t trine_model_n_layer(const trine_model* model) {
  const ModelState* m = ModelOf("trine_model_n_layer", model);
  return m ? m->model->config().n_layer : TRINE_ERROR_INVALID_ARGUMENT;
}

uint64_t trine_model_size(const trine_model* model) {
  const ModelState* m = ModelOf("trine_model_size", model);
  return m ? m->size_bytes : 0;
}

uint64_t trine_model_n_params(const trine_model* model) {
  const ModelState* m = ModelOf("trine_model_n_params", model);
  return m ? m->n_params : 0;
}

const char* trine_model_arch(const trine_model* model) {
  const ModelState* m = ModelOf("trine_model_arch", model);
  return m ? m->model->config().arch_name.c_str() : nullptr;
}

const char* trine_model_desc(const trine_model* model) {
  const ModelState* m = ModelOf("trine_model_desc", model);
  return m ? m->desc.c_str() : nullptr;
}

trine_token trine_model_token_bos(const trine_model* model) {
  const ModelState* m = ModelOf("trine_model_token_bos", model);
  return m && m->model->vocab().bos() >= 0 ? m->model->vocab().bos() : TRINE_TOKEN_NULL;
}

trine_token trine_model_token_eos(const trine_model* model) {
  const ModelState* m = ModelOf("trine_model_token_eos", model);
  return m && m->model->vocab().eos() >= 0 ? m->model->vocab().eos() : TRINE_TOKEN_NULL;
}

trine_token trine_model_token_eot(const trine_model* model) {
  const ModelState* m = ModelOf("trine_model_token_eot", model);
  return m && m->model->vocab().eot() >= 0 ? m->model->vocab().eot() : TRINE_TOKEN_NULL;
}

bool trine_model_token_is_eog(const trine_model* model, trine_token token) {
  const ModelState* m = ModelOf("trine_model_token_is_eog", model);
  return m != nullptr && m->model->vocab().IsEog(token);
}

bool trine_model_add_bos(const trine_model* model) {
  const ModelState* m = ModelOf("trine_model_add_bos", model);
  return m != nullptr && m->model->vocab().add_bos();
}

// ---- Tokenizer ----------------------------------------------------------------------------------

int32_t trine_tokenize(const trine_model* model, const char* text, int32_t text_len, trine_token* tokens,
                       int32_t n_tokens_max, bool add_special, bool parse_special) {
  static const char* fn = "trine_tokenize";
  return Guard(fn, kSizeError, [&]() -> int32_t {
    const trine::Tokenizer* tok = TokenizerOf(fn, model);
    if (tok == nullptr) return kSizeError;
    if (text == nullptr && text_len != 0) return InvalidArg(fn, "text is NULL"), kSizeError;
    if (n_tokens_max < 0) return InvalidArg(fn, "n_tokens_max is negative"), kSizeError;
    if (tokens == nullptr && n_tokens_max > 0) return InvalidArg(fn, "tokens is NULL but n_tokens_max > 0"), kSizeError;
    const size_t len = text == nullptr ? 0 : text_len < 0 ? std::strlen(text) : static_cast<size_t>(text_len);
    std::vector<trine::TokenId> ids;
    trine::Status st = tok->Tokenize(std::string(text == nullptr ? "" : text, len), add_special, parse_special, &ids);
    if (!st.ok()) return Fail(st), kSizeError;
    if (ids.size() > static_cast<size_t>(INT32_MAX)) {
      SetErrorF(TRINE_ERROR_UNSUPPORTED, "%s: %zu tokens do not fit an int32_t count", fn, ids.size());
      return kSizeError;
    }
    const int32_t n = static_cast<int32_t>(ids.size());
    if (n > n_tokens_max) {
      SetErrorF(TRINE_ERROR_BUFFER_TOO_SMALL, "%s: the text needs %d tokens, the buffer holds %d", fn, n,
                n_tokens_max);
      return -n;
    }
    std::copy(ids.begin(), ids.end(), tokens);
    return n;
  });
}

int32_t trine_token_to_piece(const trine_model* model, trine_token token, char* buf, int32_t size,
                             bool render_special) {
  static const char* fn = "trine_token_to_piece";
  return Guard(fn, kSizeError, [&]() -> int32_t {
    const trine::Tokenizer* tok = TokenizerOf(fn, model);
    if (tok == nullptr) return kSizeError;
    if (!tok->IsValid(token)) {
      SetErrorF(TRINE_ERROR_INVALID_ARGUMENT, "%s: token id %d is out of range [0, %d)", fn, token,
                tok->vocab().size());
      return kSizeError;
    }
    return WriteText(fn, tok->TokenToPiece(token, render_special), buf, size);
  });
}

int32_t trine_detokenize(const trine_model* model, const trine_token* tokens, int32_t n_tokens, char* buf,
                         int32_t size, bool remove_special, bool render_special) {
  static const char* fn = "trine_detokenize";
  return Guard(fn, kSizeError, [&]() -> int32_t {
    const trine::Tokenizer* tok = TokenizerOf(fn, model);
    if (tok == nullptr) return kSizeError;
    if (n_tokens < 0) return InvalidArg(fn, "n_tokens is negative"), kSizeError;
    if (tokens == nullptr && n_tokens > 0) return InvalidArg(fn, "tokens is NULL but n_tokens > 0"), kSizeError;
    std::vector<trine::TokenId> ids(tokens, tokens + n_tokens);
    std::string text;
    trine::Status st = tok->Detokenize(ids, &text, remove_special, render_special);
    if (!st.ok()) return Fail(st), kSizeError;
    return WriteText(fn, text, buf, size);
  });
}

// ---- Context ------------------------------------------------------------------------------------

trine_context_params trine_context_default_params(void) {
  trine_context_params p;
  std::memset(&p, 0, sizeof(p));
  const trine::ContextParams d;
  p.struct_size = sizeof(p);
  p.n_ctx = d.n_ctx;
  p.n_batch = d.n_batch;
  p.n_threads = d.n_threads;
  p.kv_type = TRINE_KV_F16;
  p.kv_type_v = TRINE_KV_SAME;
  p.n_seq_max = d.n_seq_max;
  p.kv_pool_size = d.kv_pool;
  p.fixed_threads = d.fixed_threads;
  return p;
}

trine_context* trine_context_create(trine_model* model, const trine_context_params* params) {
  static const char* fn = "trine_context_create";
  return Guard(fn, static_cast<trine_context*>(nullptr), [&]() -> trine_context* {
    if (ModelOf(fn, model) == nullptr) return nullptr;
    if (params == nullptr) return InvalidArg(fn, "params is NULL (use trine_context_default_params())"), nullptr;
    // The layouts before kv_type_v and before n_seq_max were appended are still accepted
    // (kv_type_v = TRINE_KV_SAME; n_seq_max 1, kv_pool_size 0).
    struct ParamsBeforeSeqs {  // trine_context_params up to kv_type_v
      size_t struct_size;
      int32_t n_ctx, n_batch, n_threads, kv_type, kv_type_v;
    };
    const size_t size = params->struct_size;
    const bool has_kv_type_v = size != offsetof(trine_context_params, kv_type_v);
    const bool has_seqs = has_kv_type_v && size != sizeof(ParamsBeforeSeqs);
    if (has_seqs && !CheckStructSize(fn, size, sizeof(trine_context_params), "trine_context_params")) {
      return nullptr;
    }
    trine::ContextParams cp;
    cp.n_ctx = params->n_ctx;
    cp.n_batch = params->n_batch;
    cp.n_threads = params->n_threads;
    if (!KvTypeFromC(fn, &params->kv_type, "kv_type", &cp.kv_type)) return nullptr;
    if (has_kv_type_v) {
      int32_t kv_type_v = 0;
      std::memcpy(&kv_type_v, &params->kv_type_v, sizeof(kv_type_v));
      if (kv_type_v != TRINE_KV_SAME) {
        trine::KvType tv = trine::KvType::kF16;
        if (!KvTypeFromC(fn, &params->kv_type_v, "kv_type_v", &tv)) return nullptr;
        cp.kv_type_v = tv;
      }
    }
    if (has_seqs) {
      cp.n_seq_max = params->n_seq_max;
      cp.kv_pool = params->kv_pool_size;
      cp.fixed_threads = params->fixed_threads;
    }
    const trine::Model& m = *model->state->model;
    if (cp.n_ctx > m.config().n_ctx_train) {
      Log(TRINE_LOG_WARN, "context " + std::to_string(cp.n_ctx) + " is longer than the model was trained for (" +
                              std::to_string(m.config().n_ctx_train) + ")");
    }
    std::unique_ptr<trine::Context> ctx;
    trine::Status st = trine::Context::Create(m, cp, &ctx);
    if (!st.ok()) return Fail(st), nullptr;
    auto* handle = new trine_context;
    handle->model = model->state;
    handle->ctx = std::move(ctx);
    return LiveContexts().Add(handle);
  });
}

void trine_context_free(trine_context* ctx) {
  FreeHandle("trine_context_free", "trine_context", LiveContexts(), ctx);
}

trine_status trine_context_decode(trine_context* ctx, const trine_token* tokens, int32_t n_tokens, bool all_logits) {
  static const char* fn = "trine_context_decode";
  return Guard(fn, TRINE_ERROR_INTERNAL, [&]() -> trine_status {
    if (ctx == nullptr) return InvalidArg(fn, "ctx is NULL");
    if (tokens == nullptr) return InvalidArg(fn, "tokens is NULL");
    if (n_tokens <= 0) return InvalidArg(fn, "n_tokens must be > 0");
    ctx->n_logits = 0;
    trine::Status st = ctx->ctx->Decode(tokens, n_tokens, all_logits);
    if (!st.ok()) return Fail(st);
    ctx->n_logits = all_logits ? n_tokens : 1;
    return TRINE_OK;
  });
}

const float* trine_context_get_logits(trine_context* ctx, int32_t i) {
  return LogitsRow("trine_context_get_logits", ctx, i);
}

int32_t trine_context_n_past(const trine_context* ctx) {
  if (ctx == nullptr) return InvalidArg("trine_context_n_past", "ctx is NULL");
  return ctx->ctx->n_past();
}

int32_t trine_context_n_ctx(const trine_context* ctx) {
  if (ctx == nullptr) return InvalidArg("trine_context_n_ctx", "ctx is NULL");
  return ctx->ctx->n_ctx();
}

int32_t trine_context_n_threads(const trine_context* ctx) {
  if (ctx == nullptr) return InvalidArg("trine_context_n_threads", "ctx is NULL");
  return ctx->ctx->n_threads();
}

trine_status trine_context_kv_clear(trine_context* ctx) {
  if (ctx == nullptr) return InvalidArg("trine_context_kv_clear", "ctx is NULL");
  ctx->ctx->Truncate(0);
  ctx->n_logits = 0;
  return TRINE_OK;
}

trine_status trine_context_kv_trim(trine_context* ctx, int32_t n) {
  static const char* fn = "trine_context_kv_trim";
  if (ctx == nullptr) return InvalidArg(fn, "ctx is NULL");
  if (n < 0 || n > ctx->ctx->n_past()) {
    SetErrorF(TRINE_ERROR_INVALID_ARGUMENT, "%s: n = %d is outside [0, n_past = %d]", fn, n, ctx->ctx->n_past());
    return TRINE_ERROR_INVALID_ARGUMENT;
  }
  ctx->ctx->Truncate(n);
  ctx->n_logits = 0;
  return TRINE_OK;
}

// ---- Several sequences -----------------------------------------------------------------------

trine_batch* trine_batch_init(int32_t n_tokens_max) {
  static const char* fn = "trine_batch_init";
  return Guard(fn, static_cast<trine_batch*>(nullptr), [&]() -> trine_batch* {
    if (n_tokens_max <= 0) return InvalidArg(fn, "n_tokens_max must be > 0"), nullptr;
    auto* b = new trine_batch;
    b->capacity = n_tokens_max;
    b->batch.Reserve(n_tokens_max);
    return LiveBatches().Add(b);
  });
}

void trine_batch_free(trine_batch* batch) { FreeHandle("trine_batch_free", "trine_batch", LiveBatches(), batch); }

trine_status trine_batch_add(trine_batch* batch, trine_token token, int32_t pos, int32_t seq_id, bool logits) {
  static const char* fn = "trine_batch_add";
  if (batch == nullptr) return InvalidArg(fn, "batch is NULL");
  if (batch->batch.size() >= batch->capacity) {
    SetErrorF(TRINE_ERROR_INVALID_ARGUMENT, "%s: the batch is full (%d tokens)", fn, batch->capacity);
    return TRINE_ERROR_INVALID_ARGUMENT;
  }
  if (seq_id < 0) return InvalidArg(fn, "seq_id must be >= 0");
  if (pos < -1) return InvalidArg(fn, "pos must be >= 0, or -1 for where the sequence continues");
  batch->batch.Add(token, pos, seq_id, logits);  // capacity reserved: no allocation
  return TRINE_OK;
}

trine_status trine_batch_clear(trine_batch* batch) {
  if (batch == nullptr) return InvalidArg("trine_batch_clear", "batch is NULL");
  batch->batch.Clear();
  return TRINE_OK;
}

int32_t trine_batch_n_tokens(const trine_batch* batch) {
  if (batch == nullptr) return InvalidArg("trine_batch_n_tokens", "batch is NULL");
  return batch->batch.size();
}

trine_status trine_context_decode_batch(trine_context* ctx, const trine_batch* batch) {
  static const char* fn = "trine_context_decode_batch";
  return Guard(fn, TRINE_ERROR_INTERNAL, [&]() -> trine_status {
    if (ctx == nullptr) return InvalidArg(fn, "ctx is NULL");
    if (batch == nullptr) return InvalidArg(fn, "batch is NULL");
    ctx->n_logits = 0;
    trine::Status st = ctx->ctx->Decode(batch->batch);
    if (!st.ok()) return Fail(st);
    ctx->n_logits = ctx->ctx->n_outputs();
    return TRINE_OK;
  });
}

const float* trine_context_get_logits_ith(trine_context* ctx, int32_t i) {
  static const char* fn = "trine_context_get_logits_ith";
  if (ctx == nullptr) return InvalidArg(fn, "ctx is NULL"), nullptr;
  if (i == -1) return LogitsRow(fn, ctx, -1);
  const int row = ctx->n_logits > 0 ? ctx->ctx->LogitsRow(i) : -1;
  if (row < 0) {
    SetErrorF(TRINE_ERROR_INVALID_ARGUMENT, "%s: token %d of the last batch has no logits (asked for none, or out of range)",
              fn, i);
    return nullptr;
  }
  return LogitsRow(fn, ctx, row);
}

int32_t trine_context_seq_pos(const trine_context* ctx, int32_t seq_id) {
  static const char* fn = "trine_context_seq_pos";
  if (ctx == nullptr) return InvalidArg(fn, "ctx is NULL");
  if (!SeqInRange(fn, ctx, seq_id)) return TRINE_ERROR_INVALID_ARGUMENT;
  return ctx->ctx->SeqPos(seq_id);
}

trine_status trine_context_seq_rm(trine_context* ctx, int32_t seq_id, int32_t p0, int32_t p1) {
  static const char* fn = "trine_context_seq_rm";
  if (ctx == nullptr) return InvalidArg(fn, "ctx is NULL");
  if (!SeqInRange(fn, ctx, seq_id)) return TRINE_ERROR_INVALID_ARGUMENT;
  const int32_t n = ctx->ctx->SeqPos(seq_id);
  if (p0 < 0) p0 = 0;
  if (p1 >= 0 && p1 < n && p0 < p1) {
    SetErrorF(TRINE_ERROR_UNSUPPORTED,
              "%s: positions [%d, %d) of sequence %d (of %d): only a tail can be removed (p1 = -1)", fn, p0, p1,
              seq_id, n);
    return TRINE_ERROR_UNSUPPORTED;
  }
  if (p1 >= 0 && p0 >= p1) return TRINE_OK;  // an empty range
  ctx->ctx->SeqTruncate(seq_id, p0);  // the last decode's logits stay valid
  return TRINE_OK;
}

trine_status trine_context_seq_fork(trine_context* ctx, int32_t src, int32_t dst, int32_t n_pos) {
  static const char* fn = "trine_context_seq_fork";
  return Guard(fn, TRINE_ERROR_INTERNAL, [&]() -> trine_status {
    if (ctx == nullptr) return InvalidArg(fn, "ctx is NULL");
    if (!SeqInRange(fn, ctx, src) || !SeqInRange(fn, ctx, dst)) return TRINE_ERROR_INVALID_ARGUMENT;
    const int32_t n = n_pos == -1 ? ctx->ctx->SeqPos(src) : n_pos;
    trine::Status st = ctx->ctx->SeqFork(src, dst, n);
    if (!st.ok()) return Fail(st);
    return TRINE_OK;  // the last decode's logits stay valid
  });
}

int32_t trine_context_n_seq_max(const trine_context* ctx) {
  if (ctx == nullptr) return InvalidArg("trine_context_n_seq_max", "ctx is NULL");
  return ctx->ctx->n_seq_max();
}

int32_t trine_context_kv_pool_size(const trine_context* ctx) {
  if (ctx == nullptr) return InvalidArg("trine_context_kv_pool_size", "ctx is NULL");
  return ctx->ctx->kv().n_blocks() * trine::kKvBlockPositions;
}

int32_t trine_context_kv_pool_free(const trine_context* ctx) {
  if (ctx == nullptr) return InvalidArg("trine_context_kv_pool_free", "ctx is NULL");
  return ctx->ctx->kv().n_free_blocks() * trine::kKvBlockPositions;
}

// ---- Sampler ------------------------------------------------------------------------------------

trine_sampler_params trine_sampler_default_params(void) {
  trine_sampler_params p;
  std::memset(&p, 0, sizeof(p));
  const trine::SamplerParams d;
  p.struct_size = sizeof(p);
  p.temp = d.temp;
  p.top_k = d.top_k;
  p.top_p = d.top_p;
  p.min_p = d.min_p;
  p.repeat_penalty = d.repeat_penalty;
  p.repeat_last_n = d.repeat_last_n;
  p.seed = d.seed;
  p.presence_penalty = d.presence_penalty;
  p.frequency_penalty = d.frequency_penalty;
  return p;
}

trine_sampler* trine_sampler_create(const trine_sampler_params* params) {
  static const char* fn = "trine_sampler_create";
  return Guard(fn, static_cast<trine_sampler*>(nullptr), [&]() -> trine_sampler* {
    if (params == nullptr) return InvalidArg(fn, "params is NULL (use trine_sampler_default_params())"), nullptr;
    // The layout before the OpenAI penalties were appended (up to seed) is still accepted.
    const bool has_penalties = params->struct_size != offsetof(trine_sampler_params, presence_penalty);
    if (has_penalties &&
        !CheckStructSize(fn, params->struct_size, sizeof(trine_sampler_params), "trine_sampler_params")) {
      return nullptr;
    }
    trine::SamplerParams sp;
    if (has_penalties) {
      sp.presence_penalty = params->presence_penalty;
      sp.frequency_penalty = params->frequency_penalty;
    }
    sp.temp = params->temp;
    sp.top_k = params->top_k;
    sp.top_p = params->top_p;
    sp.min_p = params->min_p;
    sp.repeat_penalty = params->repeat_penalty;
    sp.repeat_last_n = params->repeat_last_n;
    sp.seed = params->seed;
    trine::Status st = trine::ValidateSamplerParams(sp);
    if (!st.ok()) {
      SetErrorF(TRINE_ERROR_INVALID_ARGUMENT, "%s: invalid params: %s", fn, st.message().c_str());
      return nullptr;
    }
    return LiveSamplers().Add(new trine_sampler(sp));
  });
}

void trine_sampler_free(trine_sampler* sampler) {
  FreeHandle("trine_sampler_free", "trine_sampler", LiveSamplers(), sampler);
}

trine_token trine_sampler_sample(trine_sampler* sampler, trine_context* ctx, int32_t i) {
  static const char* fn = "trine_sampler_sample";
  return Guard(fn, static_cast<trine_token>(TRINE_ERROR_INTERNAL), [&]() -> trine_token {
    if (sampler == nullptr) return InvalidArg(fn, "sampler is NULL");
    const float* logits = LogitsRow(fn, ctx, i);
    if (logits == nullptr) return TRINE_ERROR_INVALID_ARGUMENT;
    return sampler->sampler.Sample(logits, ctx->ctx->n_vocab());
  });
}

trine_token trine_sampler_sample_logits(trine_sampler* sampler, const float* logits, int32_t n_vocab) {
  static const char* fn = "trine_sampler_sample_logits";
  return Guard(fn, static_cast<trine_token>(TRINE_ERROR_INTERNAL), [&]() -> trine_token {
    if (sampler == nullptr) return InvalidArg(fn, "sampler is NULL");
    if (logits == nullptr) return InvalidArg(fn, "logits is NULL");
    if (n_vocab <= 0) return InvalidArg(fn, "n_vocab must be > 0");
    return sampler->sampler.Sample(logits, n_vocab);
  });
}

trine_status trine_sampler_accept(trine_sampler* sampler, trine_token token) {
  static const char* fn = "trine_sampler_accept";
  return Guard(fn, TRINE_ERROR_INTERNAL, [&]() -> trine_status {
    if (sampler == nullptr) return InvalidArg(fn, "sampler is NULL");
    if (token < 0) {
      SetErrorF(TRINE_ERROR_INVALID_ARGUMENT, "%s: token id %d is negative", fn, token);
      return TRINE_ERROR_INVALID_ARGUMENT;
    }
    sampler->sampler.Accept(token);
    return TRINE_OK;
  });
}

trine_status trine_sampler_reset(trine_sampler* sampler) {
  if (sampler == nullptr) return InvalidArg("trine_sampler_reset", "sampler is NULL");
  sampler->sampler.Reset();
  return TRINE_OK;
}

// ---- Generation ---------------------------------------------------------------------------------

int32_t trine_generate(trine_context* ctx, trine_sampler* sampler, const char* prompt, int32_t n_predict,
                       trine_token_callback callback, void* user_data) {
  static const char* fn = "trine_generate";
  return Guard(fn, static_cast<int32_t>(TRINE_ERROR_INTERNAL), [&]() -> int32_t {
    if (ctx == nullptr) return InvalidArg(fn, "ctx is NULL");
    if (sampler == nullptr) return InvalidArg(fn, "sampler is NULL");
    const ModelState& m = *ctx->model;
    if (!m.tokenizer) return Fail(m.tokenizer_status);
    trine::Context& c = *ctx->ctx;
    std::vector<trine::TokenId> ids;
    if (prompt != nullptr && *prompt != '\0') {
      trine::Status st = m.tokenizer->Tokenize(prompt, c.n_past() == 0, false, &ids);
      if (!st.ok()) return Fail(st);
    }
    trine::GenerateState state;
    state.logits_row = ctx->n_logits - 1;
    const auto on_token = [&](int32_t token) {
      if (callback == nullptr) return true;
      const std::string piece = m.tokenizer->TokenToPiece(token, false);
      return callback(piece.c_str(), piece.size(), token, user_data);
    };
    int32_t generated = 0;
    trine::Status st = trine::Generate(c, ids, n_predict, sampler->sampler, on_token, &state, &generated);
    ctx->n_logits = state.logits_row + 1;
    if (!st.ok()) {
      // The prompt checks name the function, as the C API's argument errors do.
      if (st.code() == trine::StatusCode::kInvalidArgument) {
        SetErrorF(TRINE_ERROR_INVALID_ARGUMENT, "%s: %s", fn, st.message().c_str());
        return TRINE_ERROR_INVALID_ARGUMENT;
      }
      return Fail(st);
    }
    return generated;
  });
}

// ---- Chat templates -----------------------------------------------------------------------------

int32_t trine_chat_apply_template(const trine_model* model, const char* tmpl, const trine_chat_message* messages,
                                  size_t n_messages, bool add_assistant, char* buf, int32_t size) {
  static const char* fn = "trine_chat_apply_template";
  return Guard(fn, kSizeError, [&]() -> int32_t {
    if (messages == nullptr && n_messages > 0) return InvalidArg(fn, "messages is NULL but n_messages > 0"), kSizeError;
    std::unique_ptr<trine::ChatFormat> format;
    if (!ResolveChatFormat(fn, model, tmpl, &format)) return kSizeError;
    std::vector<trine::ChatMessage> msgs;
    msgs.reserve(n_messages);
    for (size_t i = 0; i < n_messages; ++i) {
      if (messages[i].role == nullptr || messages[i].content == nullptr) {
        SetErrorF(TRINE_ERROR_INVALID_ARGUMENT, "%s: messages[%zu] has a NULL role or content", fn, i);
        return kSizeError;
      }
      const std::string role = messages[i].role;
      if (role != "system" && role != "user" && role != "assistant") {
        SetErrorF(TRINE_ERROR_INVALID_ARGUMENT, "%s: messages[%zu].role \"%.40s\" is not system, user or assistant",
                  fn, i, messages[i].role);
        return kSizeError;
      }
      msgs.push_back({messages[i].role, messages[i].content});
    }
    std::string text;
    const trine::Status st = format->Render(msgs, add_assistant, &text);
    if (!st.ok()) return Fail(st), kSizeError;
    return WriteText(fn, text, buf, size);
  });
}

const char* trine_chat_template_name(const trine_model* model, const char* tmpl) {
  static const char* fn = "trine_chat_template_name";
  return Guard(fn, static_cast<const char*>(nullptr), [&]() -> const char* {
    std::unique_ptr<trine::ChatFormat> format;
    if (!ResolveChatFormat(fn, model, tmpl, &format)) return nullptr;
    return format->name();
  });
}

int32_t trine_chat_end_of_turn(const trine_model* model, const char* tmpl, char* buf, int32_t size) {
  static const char* fn = "trine_chat_end_of_turn";
  return Guard(fn, kSizeError, [&]() -> int32_t {
    std::unique_ptr<trine::ChatFormat> format;
    if (!ResolveChatFormat(fn, model, tmpl, &format)) return kSizeError;
    return WriteText(fn, format->EndOfAssistantTurn(), buf, size);
  });
}

}  // extern "C"
