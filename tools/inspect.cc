// `trine inspect FILE [--json]`: architecture summary, metadata, tensor table, totals per type.
// The file is fully validated first (reader + model-level checks for supported architectures),
// so inspect doubles as a "will this file load?" check.
#include <cxxopts.hpp>
#include <nlohmann/json.hpp>

#include <cinttypes>
#include <cstdlib>
#include <cstdio>
#include <map>

#include "cli_args.h"
#include "cli_common.h"
#include "commands.h"
#include "gguf/gguf_reader.h"
#include "cpu_features.h"
#include "kernels.h"
#include "model/model.h"
#include "model/model_config.h"
#include "tokenizer/vocab.h"

namespace trine::cli {
namespace {

struct TypeTotals {
  int64_t tensors = 0;
  int64_t elems = 0;
  uint64_t bytes = 0;
};

std::string HumanBytes(uint64_t b) {
  char buf[32];
  if (b >= (1ull << 30)) {
    std::snprintf(buf, sizeof(buf), "%.2f GiB", static_cast<double>(b) / (1ull << 30));
  } else if (b >= (1ull << 20)) {
    std::snprintf(buf, sizeof(buf), "%.2f MiB", static_cast<double>(b) / (1ull << 20));
  } else if (b >= 1024) {
    std::snprintf(buf, sizeof(buf), "%.2f KiB", static_cast<double>(b) / 1024.0);
  } else {
    std::snprintf(buf, sizeof(buf), "%llu B", static_cast<unsigned long long>(b));
  }
  return buf;
}

nlohmann::json ValueToJson(const GgufValue& v, size_t max_items) {
  if (v.is_string()) return v.str();
  if (!v.is_array()) {
    bool b;
    if (v.AsBool(&b)) return b;
    if (v.type() == GgufType::kU64) {
      uint64_t u = 0;
      v.AsUint(&u);
      return u;
    }
    int64_t i;
    if (v.AsInt(&i)) return i;
    double d = 0;
    v.AsDouble(&d);
    return d;
  }
  nlohmann::json j;
  j["type"] = "array";
  j["element_type"] = GgufTypeName(v.elem_type());
  j["count"] = v.count();
  nlohmann::json items = nlohmann::json::array();
  const uint64_t shown = std::min<uint64_t>(v.count(), max_items);
  for (uint64_t i = 0; i < shown; ++i) {
    if (v.elem_type() == GgufType::kString) {
      items.push_back(v.strings()[i]);
    } else if (v.elem_type() == GgufType::kArray) {
      items.push_back(ValueToJson(v.items()[i], max_items));
    } else {
      double d = 0;
      int64_t iv = 0;
      if (v.elem_type() == GgufType::kF32 || v.elem_type() == GgufType::kF64) {
        v.DoubleAt(i, &d);
        items.push_back(d);
      } else if (v.IntAt(i, &iv)) {
        items.push_back(iv);
      } else {
        v.DoubleAt(i, &d);
        items.push_back(d);
      }
    }
  }
  j["items"] = items;
  j["truncated"] = shown < v.count();
  return j;
}

}  // namespace

int RunInspect(int argc, char** argv) {
  cxxopts::Options opts("trine inspect", "Show a GGUF file's architecture, metadata and tensors.");
  opts.add_options()("json", "print one JSON object (schema: docs in README, 'trine-inspect' v1)")(
      "no-mmap", "read the file instead of mapping it")(
      "kernels", "load the model and show the kernel bound to each weight, and why")(
      "m,model", "GGUF file (the same as FILE, as other commands take it)", cxxopts::value<std::string>())(
      "h,help", "show this help")(
      "file", "GGUF file", cxxopts::value<std::string>());
  opts.positional_help("FILE");
  cxxopts::ParseResult args;
  if (const int rc = ParseCommand("inspect", opts, argc, argv, &args, "file"); rc >= 0) return rc;
  if (args.count("file") + args.count("model") != 1) return UsageError("inspect", "give one FILE (or -m FILE)");
  if (!args.unmatched().empty()) return UsageError("inspect", "unexpected argument '" + args.unmatched()[0] + "'");
  const std::string path = args[args.count("file") ? "file" : "model"].as<std::string>();

  GgufOpenOptions oo;
  oo.use_mmap = !args.count("no-mmap");
  std::unique_ptr<GgufFile> f;
  Status st = GgufFile::Open(path, oo, &f);
  if (!st.ok()) return Fail(st);

  // Model-level validation: a file with tensors must be a model trine can run (or at least an
  // architecture we know); vocabulary-only files must carry a consistent tokenizer.
  ModelConfig cfg;
  bool have_cfg = false;
  if (!f->tensors().empty() || IsSupportedArch(f->architecture())) {
    if (f->architecture().empty()) return Fail(path + ": missing required key 'general.architecture'");
    if (!f->tensors().empty()) {
      st = LoadModelConfig(*f, &cfg);
      if (!st.ok()) return Fail(st);
      have_cfg = true;
    }
  }
  Vocab vocab;
  bool have_vocab = false;
  if (f->Find("tokenizer.ggml.model")) {
    st = LoadVocab(*f, &vocab);
    if (!st.ok()) return Fail(st);
    have_vocab = true;
    if (have_cfg && vocab.size() > cfg.n_vocab) {
      return Fail(path + ": tokenizer has " + std::to_string(vocab.size()) + " tokens but token_embd.weight has " +
                  std::to_string(cfg.n_vocab) + " rows");
    }
  }

  if (args.count("kernels")) {
    if (!have_cfg) return Fail(path + ": --kernels needs a model file with tensors");
    ModelLoadOptions lo;
    lo.use_mmap = oo.use_mmap;
    std::unique_ptr<Model> model;
    st = Model::Load(path, lo, &model);
    if (!st.ok()) return Fail(st);
    std::printf("cpu:    %s\n", kernels::GetCpuFeatures().ToString().c_str());
    std::printf("isa:    %s (%s)\n", kernels::IsaName(model->isa()),
                std::getenv("TRINE_ISA") ? "forced by TRINE_ISA" : "best level this CPU and build support");
    std::printf("in brackets: what the kernel reads (the file's mapped rows, a copy, a 16-row interleave, a\n"
                "repack or requantization made at load); activations are quantized per weight type (Q8_K for\n"
                "ternary/K-quants, Q8_0 for Q4_0/Q8_0, fp16 for F16) as llama.cpp does.\n\n");
    for (const auto& b : model->bindings()) {
      std::printf("  %-32s %s [%s]\n", b.tensor.c_str(), b.kernel.c_str(), b.layout.c_str());
    }
    return kExitOk;
  }

  std::map<std::string, TypeTotals> totals;
  int64_t n_params = 0;
  uint64_t n_bytes = 0;
  for (const auto& t : f->tensors()) {
    auto& tt = totals[TypeName(t.type)];
    tt.tensors++;
    tt.elems += t.n_elems;
    tt.bytes += t.n_bytes;
    n_params += t.n_elems;
    n_bytes += t.n_bytes;
  }
  const double bpw = n_params ? 8.0 * static_cast<double>(n_bytes) / static_cast<double>(n_params) : 0.0;

  if (args.count("json")) {
    nlohmann::json j;
    j["schema"] = "trine-inspect";
    j["schema_version"] = 1;
    j["file"] = path;
    j["gguf_version"] = f->version();
    j["file_size"] = f->file_size();
    j["n_splits"] = f->n_splits();
    j["alignment"] = f->alignment();
    j["data_offset"] = f->data_offset();
    j["architecture"] = f->architecture();
    if (have_cfg) {
      j["model"] = {{"n_layer", cfg.n_layer},       {"n_embd", cfg.n_embd},     {"n_head", cfg.n_head},
                    {"n_head_kv", cfg.n_head_kv},   {"head_dim", cfg.head_dim}, {"n_ff", cfg.n_ff},
                    {"n_ctx_train", cfg.n_ctx_train}, {"n_vocab", cfg.n_vocab}, {"rope_freq_base", cfg.rope_freq_base},
                    {"rms_eps", cfg.rms_eps},       {"tied_output", cfg.tied_output}};
    }
    if (have_vocab) j["tokenizer"] = {{"model", vocab.model_name()}, {"n_tokens", vocab.size()}};
    nlohmann::json md = nlohmann::json::object();
    for (const auto& [k, v] : f->metadata()) md[k] = ValueToJson(v, 16);
    j["metadata"] = md;
    nlohmann::json ts = nlohmann::json::array();
    for (const auto& t : f->tensors()) {
      nlohmann::json tj;
      tj["name"] = t.name;
      tj["type"] = TypeName(t.type);
      tj["ggml_type"] = t.ggml_type;
      tj["shape"] = std::vector<int64_t>(t.ne, t.ne + t.n_dims);
      tj["n_elems"] = t.n_elems;
      tj["bytes"] = t.n_bytes;
      tj["offset"] = t.file_offset;
      tj["split"] = t.split;
      ts.push_back(tj);
    }
    j["tensors"] = ts;
    nlohmann::json tot = nlohmann::json::object();
    for (const auto& [name, tt] : totals) tot[name] = {{"tensors", tt.tensors}, {"elems", tt.elems}, {"bytes", tt.bytes}};
    j["totals"] = {{"by_type", tot}, {"n_params", n_params}, {"bytes", n_bytes}, {"bits_per_weight", bpw}};
    std::printf("%s\n", j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    return kExitOk;
  }

  std::printf("file:          %s (%s, GGUF v%u, %d split%s, alignment %u)\n", path.c_str(),
              HumanBytes(f->file_size()).c_str(), f->version(), f->n_splits(), f->n_splits() == 1 ? "" : "s",
              f->alignment());
  std::printf("architecture:  %s\n", f->architecture().empty() ? "(none)" : f->architecture().c_str());
  if (have_cfg) {
    std::printf("layers:        %d\n", cfg.n_layer);
    std::printf("embedding:     %d\n", cfg.n_embd);
    std::printf("heads:         %d (kv %d, head dim %d)\n", cfg.n_head, cfg.n_head_kv, cfg.head_dim);
    std::printf("feed-forward:  %d\n", cfg.n_ff);
    std::printf("context:       %d (trained)\n", cfg.n_ctx_train);
    std::printf("vocab:         %d\n", cfg.n_vocab);
    std::printf("rope:          %s, base %g\n", cfg.rope_neox ? "neox" : "norm", cfg.rope_freq_base);
    std::printf("output:        %s\n", cfg.tied_output ? "tied to token_embd" : "output.weight");
  }
  if (have_vocab) std::printf("tokenizer:     %s, %d tokens\n", vocab.model_name().c_str(), vocab.size());

  std::printf("\nmetadata (%zu keys):\n", f->metadata().size());
  for (const auto& [k, v] : f->metadata()) {
    std::printf("  %-40s %-8s %s\n", k.c_str(), GgufTypeName(v.type()), v.ToDisplayString().c_str());
  }
  if (!f->tensors().empty()) {
    std::printf("\ntensors (%zu):\n  %-32s %-6s %-22s %12s %12s\n", f->tensors().size(), "name", "type", "shape",
                "bytes", "offset");
    for (const auto& t : f->tensors()) {
      std::printf("  %-32s %-6s %-22s %12" PRIu64 " %12" PRIu64 "\n", t.name.c_str(), TypeName(t.type),
                  t.ShapeString().c_str(), t.n_bytes, t.file_offset);
    }
    std::printf("\ntotals by type:\n");
    for (const auto& [name, tt] : totals) {
      std::printf("  %-6s %5" PRId64 " tensors %14" PRId64 " params %12s\n", name.c_str(), tt.tensors, tt.elems,
                  HumanBytes(tt.bytes).c_str());
    }
    std::printf("\nparameters:    %" PRId64 " (%.2f M)\n", n_params, static_cast<double>(n_params) / 1e6);
    std::printf("tensor data:   %s, %.3f bits per weight\n", HumanBytes(n_bytes).c_str(), bpw);
  }
  return kExitOk;
}

}  // namespace trine::cli
