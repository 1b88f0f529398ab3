// Options shared by the subcommands that run a model (generate, perplexity, chat): model path
// resolution (the bundled default), context flags, and loading with clear errors.
#pragma once

#include <cxxopts.hpp>

#include <memory>
#include <optional>
#include <string>

#include "core/status.h"
#include "model/model.h"
#include "runtime/context.h"
#include "sampler/sampler.h"

namespace trine::cli {

inline constexpr const char* kDefaultModelName = "bitnet-tiny-stories-TQ2_0-f16emb.gguf";

// A file shipped under models/ (e.g. "vocab/ggml-vocab-llama-bpe.gguf"), looked up under ./models,
// then ../models and ./models next to the binary; the first candidate when none exists.
std::string ResolveBundledPath(const std::string& relative);

// Returns the path to use for `-m`; `given` empty means the bundled default, looked up under
// ./models, then ../models and ./models next to the binary.
std::string ResolveModelPath(const std::string& given);

// -m, -c, -b, -t, --kv-type (K and V), -ctk/--cache-type-k, -ctv/--cache-type-v (llama.cpp's
// flags; main() rewrites the single-dash spellings), --no-mmap.
void AddModelOptions(cxxopts::Options& options, int default_ctx = 0, int default_batch = 512);

// --mem-budget, --auto, --plan, --no-cache, --mlock (generate, chat): load under a memory plan.
void AddPlanOptions(cxxopts::Options& options);

// Reads the plan flags into the plan fields of *params (trine_model_params; untouched without
// them). `has_plan_options` false: the command has no plan flags.
struct PlanFlags {
  uint64_t mem_budget = 0;
  std::string plan_path;
  bool auto_plan = false, no_cache = false, mlock = false;
};
Status ParsePlanFlags(const cxxopts::ParseResult& args, PlanFlags* flags);

// Reads and validates the context flags.
Status ParseContextParams(const cxxopts::ParseResult& args, ContextParams* params);

// Loads the model named by -m and creates a context; *load_ms receives the wall time.
Status LoadModelAndContext(const cxxopts::ParseResult& args, std::unique_ptr<Model>* model,
                           std::unique_ptr<Context>* ctx, std::string* path, double* load_ms);

// --temp, --top-k, --top-p, --min-p, --repeat-penalty, --repeat-last-n, -s/--seed.
void AddSamplingOptions(cxxopts::Options& options);
// Reads and validates them; a negative seed means "from the clock".
Status ParseSamplerParams(const cxxopts::ParseResult& args, SamplerParams* params);

// --chat-template NAME (a built-in format) and --chat-template-file FILE (a Jinja template), as
// llama.cpp spells them (chat, serve).
void AddChatTemplateOptions(cxxopts::Options& options);
// The forced template -- a built-in's name or a Jinja template's text -- or nullopt for the
// model's own; errors for an unknown name, an unreadable file, a template that does not parse, or
// both flags at once.
Status ParseChatTemplateOption(const cxxopts::ParseResult& args, std::optional<std::string>* out);

// Reads a whole text file.
Status ReadTextFile(const std::string& path, std::string* out);

}  // namespace trine::cli
