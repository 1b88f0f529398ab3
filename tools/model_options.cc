// Shared model options of the subcommands.
#include "model_options.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <climits>
#include <vector>

#include "profiler/plan_load.h"
#include "tokenizer/chat_format.h"

namespace trine::cli {

std::string ResolveBundledPath(const std::string& relative) {
  std::vector<std::string> candidates = {"models/" + relative};
  char exe[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (n > 0) {
    exe[n] = '\0';
    std::string dir(exe);
    dir = dir.substr(0, dir.rfind('/'));
    candidates.push_back(dir + "/../models/" + relative);
    candidates.push_back(dir + "/models/" + relative);
  }
  for (const auto& c : candidates) {
    if (access(c.c_str(), R_OK) == 0) return c;
  }
  return candidates[0];
}

std::string ResolveModelPath(const std::string& given) {
  return given.empty() ? ResolveBundledPath(kDefaultModelName) : given;
}

void AddModelOptions(cxxopts::Options& o, int default_ctx, int default_batch) {
  o.add_options("model")("m,model", "GGUF model file (default: the bundled model)",
                         cxxopts::value<std::string>()->default_value(""))(
      "c,ctx-size", "context size in tokens (0 = the model's, at most 4096)",
      cxxopts::value<int>()->default_value(std::to_string(default_ctx)))(
      "b,batch-size", "tokens per forward pass in prompt evaluation",
      cxxopts::value<int>()->default_value(std::to_string(default_batch)))(
      "t,threads", "threads (0 = all cores); pin with OMP_PROC_BIND/OMP_PLACES",
      cxxopts::value<int>()->default_value("0"))("kv-type", "KV cache precision of K and V: f16, f32, q8_0 or q4_0",
                                                 cxxopts::value<std::string>()->default_value("f16"))(
      "ctk,cache-type-k", "K cache precision (llama.cpp's -ctk): f16, q8_0 or q4_0 (default: --kv-type)",
      cxxopts::value<std::string>())(
      "ctv,cache-type-v", "V cache precision (llama.cpp's -ctv): f16, q8_0 or q4_0 (default: --kv-type)",
      cxxopts::value<std::string>())(
      "no-mmap", "read the model into memory instead of mapping it");
}

void AddPlanOptions(cxxopts::Options& o) {
  o.add_options("plan")("mem-budget",
                        "memory budget: bytes (K/M/G suffixes) or N% of RAM; layers that do not fit are "
                        "streamed from the file (a cached profile's plan when one matches, else placement only)",
                        cxxopts::value<std::string>()->default_value(""))(
      "auto", "profile at load when no cached plan matches (as trine profile; slow on large models)")(
      "plan", "apply this plan file (trine profile --plan-out)", cxxopts::value<std::string>())(
      "no-cache", "ignore cached plans")("mlock", "mlock resident layers");
}

Status ParsePlanFlags(const cxxopts::ParseResult& a, PlanFlags* f) {
  *f = PlanFlags();
  const std::string budget = a["mem-budget"].as<std::string>();
  if (!budget.empty()) {
    f->mem_budget = profiler::ParseMemBudget(budget);
    if (f->mem_budget == 0) {
      return InvalidArgument("--mem-budget must be bytes (optionally K/M/G) or a percentage of RAM, got '" + budget +
                             "'");
    }
  }
  if (a.count("plan")) f->plan_path = a["plan"].as<std::string>();
  f->auto_plan = a.count("auto") > 0;
  f->no_cache = a.count("no-cache") > 0;
  f->mlock = a.count("mlock") > 0;
  return Status::Ok();
}

Status ParseContextParams(const cxxopts::ParseResult& a, ContextParams* cp) {
  cp->n_ctx = a["ctx-size"].as<int>();
  cp->n_batch = a["batch-size"].as<int>();
  cp->n_threads = a["threads"].as<int>();
  const std::string kv = a["kv-type"].as<std::string>();
  KvType both = KvType::kF16;
  if (!ParseKvType(kv, &both)) {
    return InvalidArgument("--kv-type must be f16, f32, q8_0 or q4_0, got '" + kv + "'");
  }
  cp->kv_type = both;
  cp->kv_type_v.reset();
  if (a.count("cache-type-k")) {
    const std::string k = a["cache-type-k"].as<std::string>();
    if (!ParseKvType(k, &cp->kv_type)) {
      return InvalidArgument("-ctk/--cache-type-k must be f16, f32, q8_0 or q4_0, got '" + k + "'");
    }
  }
  if (a.count("cache-type-v")) {
    const std::string v = a["cache-type-v"].as<std::string>();
    KvType tv = KvType::kF16;
    if (!ParseKvType(v, &tv)) {
      return InvalidArgument("-ctv/--cache-type-v must be f16, f32, q8_0 or q4_0, got '" + v + "'");
    }
    cp->kv_type_v = tv;
  } else if (a.count("cache-type-k")) {
    cp->kv_type_v = both;  // -ctk alone changes K only
  }
  if (cp->kv_type_v && *cp->kv_type_v == cp->kv_type) cp->kv_type_v.reset();
  if (cp->n_ctx < 0) return InvalidArgument("-c must be >= 0, got " + std::to_string(cp->n_ctx));
  if (cp->n_batch <= 0) return InvalidArgument("-b must be > 0, got " + std::to_string(cp->n_batch));
  if (cp->n_threads < 0 || cp->n_threads > 1024) {
    return InvalidArgument("-t must be in [0, 1024], got " + std::to_string(cp->n_threads));
  }
  return Status::Ok();
}

Status LoadModelAndContext(const cxxopts::ParseResult& a, std::unique_ptr<Model>* model,
                           std::unique_ptr<Context>* ctx, std::string* path, double* load_ms) {
  ContextParams cp;
  TRINE_RETURN_IF_ERROR(ParseContextParams(a, &cp));
  const auto t0 = std::chrono::steady_clock::now();
  *path = ResolveModelPath(a["model"].as<std::string>());
  ModelLoadOptions lo;
  lo.use_mmap = !a.count("no-mmap");
  TRINE_RETURN_IF_ERROR(Model::Load(*path, lo, model));
  if (cp.n_ctx > (*model)->config().n_ctx_train) {
    std::fprintf(stderr, "warning: context %d is longer than the model was trained for (%d)\n", cp.n_ctx,
                 (*model)->config().n_ctx_train);
  }
  TRINE_RETURN_IF_ERROR(Context::Create(**model, cp, ctx));
  *load_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return Status::Ok();
}

void AddSamplingOptions(cxxopts::Options& o) {
  o.add_options("sampling")("temp", "temperature (0 = greedy)", cxxopts::value<float>()->default_value("0.8"))(
      "top-k", "top-k sampling (0 = off)", cxxopts::value<int>()->default_value("40"))(
      "top-p", "top-p sampling (1 = off)", cxxopts::value<float>()->default_value("0.95"))(
      "min-p", "min-p sampling (0 = off)", cxxopts::value<float>()->default_value("0.05"))(
      "repeat-penalty", "repetition penalty (1 = off)", cxxopts::value<float>()->default_value("1.0"))(
      "repeat-last-n", "tokens considered by the penalties", cxxopts::value<int>()->default_value("64"))(
      "presence-penalty", "subtract from tokens seen in the window (0 = off)", cxxopts::value<float>()->default_value("0"))(
      "frequency-penalty", "subtract per occurrence in the window (0 = off)", cxxopts::value<float>()->default_value("0"))(
      "s,seed", "random seed (-1 = from the clock)", cxxopts::value<int64_t>()->default_value("-1"));
}

Status ParseSamplerParams(const cxxopts::ParseResult& a, SamplerParams* sp) {
  sp->temp = a["temp"].as<float>();
  sp->top_k = a["top-k"].as<int>();
  sp->top_p = a["top-p"].as<float>();
  sp->min_p = a["min-p"].as<float>();
  sp->repeat_penalty = a["repeat-penalty"].as<float>();
  sp->repeat_last_n = a["repeat-last-n"].as<int>();
  sp->presence_penalty = a["presence-penalty"].as<float>();
  sp->frequency_penalty = a["frequency-penalty"].as<float>();
  const int64_t seed = a["seed"].as<int64_t>();
  sp->seed = seed < 0 ? static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count())
                      : static_cast<uint64_t>(seed);
  return ValidateSamplerParams(*sp);
}

Status ReadTextFile(const std::string& path, std::string* out) {
  // POSIX reads rather than an ifstream: a directory opens fine as a stream and reads as empty
  // text (or throws on some libstdc++ paths), which would run a model on an empty prompt.
  constexpr size_t kMaxBytes = size_t{1} << 30;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return IoError(path + ": cannot open: " + std::strerror(errno));
  struct stat sb {};
  if (::fstat(fd, &sb) != 0 || S_ISDIR(sb.st_mode)) {
    const int err = S_ISDIR(sb.st_mode) ? EISDIR : errno;
    ::close(fd);
    return IoError(path + ": cannot read: " + std::strerror(err));
  }
  std::string text;
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      return IoError(path + ": read failed: " + std::strerror(err));
    }
    if (text.size() + static_cast<size_t>(n) > kMaxBytes) {
      ::close(fd);
      return InvalidArgument(path + ": text file larger than 1 GiB");
    }
    text.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  *out = std::move(text);
  return Status::Ok();
}

void AddChatTemplateOptions(cxxopts::Options& options) {
  options.add_options("chat template")(
      "chat-template", "use a built-in format instead of the model's template: chatml, llama3, llama2, bitnet",
      cxxopts::value<std::string>())("chat-template-file", "use this Jinja chat template instead of the model's",
                                     cxxopts::value<std::string>());
}

Status ParseChatTemplateOption(const cxxopts::ParseResult& args, std::optional<std::string>* out) {
  out->reset();
  if (args.count("chat-template") && args.count("chat-template-file")) {
    return InvalidArgument("give --chat-template or --chat-template-file, not both");
  }
  std::string source;
  if (args.count("chat-template")) {
    source = args["chat-template"].as<std::string>();
  } else if (args.count("chat-template-file")) {
    const std::string path = args["chat-template-file"].as<std::string>();
    TRINE_RETURN_IF_ERROR(ReadTextFile(path, &source));
    if (source.find("{{") == std::string::npos && source.find("{%") == std::string::npos) {
      return InvalidArgument(path + ": not a Jinja template (no {{ or {% in it)");
    }
  } else {
    return Status::Ok();
  }
  std::unique_ptr<ChatFormat> format;
  const Status st = ChatFormat::Named(source, ChatFormat::SpecialTokens(), &format);
  if (!st.ok()) {
    return Status(st.code(), (args.count("chat-template-file") ? args["chat-template-file"].as<std::string>() + ": " : "") + st.message());
  }
  *out = std::move(source);
  return Status::Ok();
}

}  // namespace trine::cli
