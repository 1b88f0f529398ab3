// Precision/placement plans: what `trine profile` decides, stored as JSON in the plan cache.
//
// Plan JSON schema ("schema": "trine.plan", "version": 2). Readers reject another schema name, a
// version newer than kPlanVersion, and (when checking against a model) another model_hash.
// Version history: 1 = activation precision per tensor and placement per layer; 2 adds "kv" (the
// chosen KV cache type and its measured candidates), "output" (the head's weight type, requantized
// at load, and its candidates) and key.kv_type "auto" / key.output_type. Version 1 plans still
// load: they mean kv.type = key.kv_type and the head in the file's type.
//
//   {
//     "schema": "trine.plan", "version": 2,
//     "trine_version": "0.1.0",
//     "model": { "path": str, "file_size": u64, "hash": "16 hex digits",
//                "hash_method": "fnv1a64-words per 256 KiB chunk of tensor data, digests + tensor sizes + file size" },
//     "machine": { "isa": "avx512"|"avx2"|"ref"|"neon", "ram_bytes": u64, "n_threads": int },
//     "key": { "mem_budget": u64 bytes (0 = default: MemAvailable when planned; see memory.budget), "max_kl": double, "samples": int, "seed": u64,
//              "n_ctx": int, "kv_type": "f16"|"f32"|"q8_0"|"q4_0"|"auto",
//              "output_type": "auto"|"file"|"f16"|"q8_0"|"q6_k"|"q4_0" }   // (v2)
//                                   // with model.hash, machine, trine_version: the cache key (all
//                                   // must match to reuse). "auto": the planner chooses.
//     "tensors": { "<tensor name>": "int8"|"fp32", ... } // activation precision per weight matrix
//     "layers": [ { "unit": "blk.0"|"output", "layer": int (-1 = head), "precision": "int8"|"fp32",
//                   "placement": "resident"|"page_cache"|"streamed", "weight_bytes": u64,
//                   "kl_int8": double (KL(unit fp32 || unit int8), the rest int8),
//                   "kl_half": [double, double], "act_norm": double,
//                   "ms_fp32": double, "ms_int8": double } ... ]  // ms = per decoded token
//     "kv": { "type": "f16"|"f32"|"q8_0"|"q4_0",        // (v2) K and V cache type to run with
//             "candidates": [ { "type": str, "bytes": u64 (cache of key.n_ctx),
//                               "kl": double (the profile's int8 baseline, only the cache changed) } ] },
//     "output": { "type": str, "file_type": str,        // (v2) head weights to run with (type !=
//                                                        // file_type: requantized at load; "auto"
//                                                        // candidates: f16/q8_0/q6_k/q4_0 no wider
//                                                        // than file_type)
//                 "candidates": [ { "type": str, "bytes": u64 (resident head bytes),
//                                   "kl": double (head with quantized activations in this type
//                                                 against the file's head with fp32 activations,
//                                                 on the int8 baseline's hidden states),
//                                   "ms": double per token,
//                                   "load_s": double (requantization at load, measured) } ] },
//     "memory": { "budget": u64, "weights": u64, "kv": u64, "activations": u64, "buffers": u64,
//                 "resident": u64, "page_cache": u64, "streamed": u64,
//                 "stream_ring": u64 (optional, 0 when absent: the streamer's buffers),
//                 "runtime": u64 (optional, 0 when absent: the planning process's resident set
//                             before any weight was read: code, metadata, vocabulary) },
//     "prediction": { "tok_s": double, "kl": double (sum of chosen units' kl_int8),
//                     "tok_s_all_fp32": double, "tok_s_all_int8": double },
//     "profile": { "samples": int, "tokens_per_sample": int, "seconds": double,
//                  "kl_all_int8": double, "kl_all_fp32": double (baseline re-run, ~0),
//                  "kl_plan": double (KL(all fp32 || the plan applied)),
//                  "split_half_spearman": double, "split_half_topk_overlap": double },
//     "measured": { "tok_s": double, "tok_s_all_fp32": double,   // optional (report runs)
//                   "tok_s_cpu": double (v2: per second of process CPU time; -1 unknown),
//                   "ppl_plan": double, "ppl_fp32": double }     // -1 without --ppl-text
//   }
//
// Planner objective (PlanFromProfile): among the KV and head candidates, the combination whose
// total memory exceeds the budget least, then the fastest predicted, then the lowest KL, with
// sum of KLs (layers' int8 + kv + head) <= max_kl.
//
// Placements are applied per layer by Model::SetLayerPlacement (see src/model/model.h):
// "resident" prefaults (and with --mlock locks) the layer's mapped weights, "page_cache" leaves
// them to the mapping, "streamed" unmaps them and a WeightStreamer per context preads them into a
// ring of layer-sized buffers with read-ahead (src/runtime/weight_streamer.h). The head (and the
// embedding) are always mapped. A plan with "profile.samples" 0 was made without profiling (a
// budget-only plan: every unit int8, layers placed in order).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/status.h"
#include "model/model.h"
#include "runtime/context.h"

namespace trine::profiler {

inline constexpr const char* kPlanSchema = "trine.plan";
inline constexpr int kPlanVersion = 2;
inline constexpr const char* kTrineVersion = "0.1.0";

struct PlanUnit {
  std::string unit;  // "blk.3" or "output"
  int layer = -1;
  std::vector<std::string> tensors;
  std::string precision = "fp32";  // "int8" | "fp32"
  std::string placement = "resident";
  uint64_t weight_bytes = 0;
  double kl_int8 = 0, kl_half[2] = {0, 0}, act_norm = 0, ms_fp32 = 0, ms_int8 = 0;
};

// One measured option for the KV cache or the head.
struct PlanCandidate {
  std::string type;
  uint64_t bytes = 0;
  double kl = 0;
  double ms = 0;      // head only: per decoded token
  double load_s = 0;  // head only: seconds to requantize it at load (0: the file's type)
};

struct PlanMemory {
  uint64_t budget = 0, weights = 0, kv = 0, activations = 0, buffers = 0;
  uint64_t resident = 0, page_cache = 0, streamed = 0;
  uint64_t stream_ring = 0;  // ring buffers of the weight streamer (when any layer is streamed)
  uint64_t runtime = 0;      // process memory besides the model (RSS before any weight), planned in
};

struct PlanKey {
  uint64_t mem_budget = 0;  // 0: the default budget (MemAvailable at planning time)
  double max_kl = 0.01;
  int samples = 8;
  uint64_t seed = 1;
  int n_ctx = 0;
  std::string kv_type = "f16";      // a KvTypeName, or "auto"
  std::string output_type = "auto";  // "auto", "file" or a type name
};

struct Plan {
  int version = kPlanVersion;
  std::string trine_version = kTrineVersion;
  std::string model_path, model_hash, hash_method;
  uint64_t file_size = 0;
  std::string isa;
  uint64_t ram_bytes = 0;
  int n_threads = 1;
  PlanKey key;
  std::map<std::string, std::string> tensors;
  std::vector<PlanUnit> units;
  std::string kv_type = "f16";  // chosen (K and V)
  std::vector<PlanCandidate> kv_candidates;
  std::string output_type, output_file_type;  // chosen / in the file ("" = unknown: the file's)
  std::vector<PlanCandidate> output_candidates;
  PlanMemory memory;
  double pred_tok_s = 0, pred_kl = 0, pred_tok_s_fp32 = 0, pred_tok_s_int8 = 0;
  int samples = 0, tokens_per_sample = 0;
  double profile_seconds = 0, kl_all_int8 = 0, kl_all_fp32 = 0, kl_plan = -1;
  double spearman = 0, topk_overlap = 0;
  double measured_tok_s = -1, measured_tok_s_fp32 = -1, measured_tok_s_int8 = -1, measured_tok_s_cpu = -1;
  double ppl_plan = -1, ppl_fp32 = -1;  // with --ppl-text
};

nlohmann::json PlanToJson(const Plan& plan);
// Parses and validates the schema/version; errors name `what` (a file path).
Status PlanFromJson(const nlohmann::json& j, const std::string& what, Plan* plan);
Status WritePlanFile(const Plan& plan, const std::string& path);
// kInvalidFile for unreadable/corrupt JSON, a foreign schema or a future version.
Status ReadPlanFile(const std::string& path, Plan* plan);

// Content hash of a model: every tensor's data in 256 KiB chunks, each digested on its own (64-bit
// FNV-1a lanes over 8-byte little-endian words, seeded by the chunk's ordinal; across the OpenMP
// threads), the digests mixed in file order with each tensor's size and the file size. With
// release_pages (mapped files only) the pages read are dropped from the resident set as the hash
// goes (MADV_DONTNEED every 8 MiB, and once more at the end), so hashing a large model does not
// raise peak RSS.
std::string ModelContentHash(const GgufFile& file, bool release_pages = false);
inline constexpr const char* kHashMethod = "fnv1a64-words per 256 KiB chunk of tensor data, digests + tensor sizes + file size";

// $XDG_CACHE_HOME/trine/plans (or ~/.cache/trine/plans); created on demand by WritePlanFile.
std::string PlanCacheDir();
std::string PlanCachePath(const std::string& model_hash);
// Sets what a new plan is made for: the model (path, content hash, hash method, file size), the
// machine (isa, RAM) and the key.
void SetPlanIdentity(const std::string& model_path, const std::string& model_hash, uint64_t file_size,
                     const std::string& isa, uint64_t ram_bytes, const PlanKey& key, Plan* plan);
// True when `plan` was made for this model hash, machine, key and trine version (a plan keyed
// kv_type "auto" matches a key asking for the KV type it chose).
bool PlanKeyMatches(const Plan& plan, const std::string& model_hash, const std::string& isa, uint64_t ram_bytes,
                    const PlanKey& key);

// Machine facts for the key.
std::string MachineIsa();
uint64_t MachineRamBytes();       // MemTotal
uint64_t MachineAvailableBytes();  // MemAvailable (falls back to MemTotal / 2)

// The plan's fp32-activation tensors, for ModelLoadOptions::f32_activation_tensors (applying a
// plan's precisions at load time, as a loader that knows nothing of plans would).
std::vector<std::string> PlanF32Tensors(const Plan& plan);

// The KV cache type the plan runs with.
KvType PlanKvType(const Plan& plan);
// The head type to requantize to at load (ModelLoadOptions::output_type): kCount when the plan
// keeps the file's type.
TypeId PlanOutputType(const Plan& plan);

// Sets each tensor's activation precision and the head's weight type as the plan says.
Status ApplyPlanPrecisions(const Plan& plan, Model* model);

// The plan's per-layer placements (layers the plan does not name: page cache).
Status PlanPlacements(const Plan& plan, int n_layer, std::vector<Placement>* out);

// Sets each tensor's activation precision and the head type as the plan says (unknown names are
// errors), and each layer's placement (Model::SetLayerPlacement: resident prefaulted and, with
// try_mlock, locked; page_cache mapped; streamed unmapped and read through a ring), and frees
// the model's spare head (a profile's last requantized candidate). *summary receives a one-line
// account.
Status ApplyPlan(const Plan& plan, Model* model, bool try_mlock, std::string* summary);

// One line: placements, precisions, planned memory against the budget.
std::string PlanSummary(const Plan& plan);

}  // namespace trine::profiler
