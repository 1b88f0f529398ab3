// Plan JSON, content hash, plan cache paths, machine facts and applying a plan to a model.
#include "profiler/plan.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <type_traits>
#include <vector>

#include "core/page_memory.h"
#include "kernels.h"

namespace trine::profiler {

using nlohmann::json;

namespace {

struct BadPlanField : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// An integer field: a JSON integer in T's range. nlohmann's get<T>() would convert a float or an
// out-of-range number unchecked (a float past T's range is undefined behaviour).
template <typename T>
T IntField(const json& v, const char* name) {
  static_assert(std::is_integral_v<T>, "integer fields only");
  using L = std::numeric_limits<T>;
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u <= static_cast<uint64_t>(L::max())) return static_cast<T>(u);
  } else if (v.is_number_integer()) {
    const int64_t i = v.get<int64_t>();
    const bool above_min = L::is_signed ? i >= static_cast<int64_t>(L::min()) : i >= 0;
    if (above_min && (i < 0 || static_cast<uint64_t>(i) <= static_cast<uint64_t>(L::max()))) return static_cast<T>(i);
  }
  throw BadPlanField(std::string("'") + name + "' must be an integer from " + std::to_string(L::min()) + " to " +
                     std::to_string(L::max()) + ", found " + v.dump());
}

template <typename T>
T IntAt(const json& obj, const char* key) {
  return IntField<T>(obj.at(key), key);
}

template <typename T>
T IntOr(const json& obj, const char* key, T fallback) {
  if (!obj.is_object()) throw BadPlanField(std::string("expected an object holding '") + key + "'");
  const auto it = obj.find(key);
  return it == obj.end() ? fallback : IntField<T>(*it, key);
}

}  // namespace

json PlanToJson(const Plan& p) {
  json j;
  j["schema"] = kPlanSchema;
  j["version"] = p.version;
  j["trine_version"] = p.trine_version;
  j["model"] = {{"path", p.model_path}, {"file_size", p.file_size}, {"hash", p.model_hash}, {"hash_method", p.hash_method}};
  j["machine"] = {{"isa", p.isa}, {"ram_bytes", p.ram_bytes}, {"n_threads", p.n_threads}};
  j["key"] = {{"mem_budget", p.key.mem_budget}, {"max_kl", p.key.max_kl}, {"samples", p.key.samples},
              {"seed", p.key.seed},             {"n_ctx", p.key.n_ctx},   {"kv_type", p.key.kv_type},
              {"output_type", p.key.output_type}};
  j["tensors"] = p.tensors;
  json layers = json::array();
  for (const PlanUnit& u : p.units) {
    layers.push_back({{"unit", u.unit},
                      {"layer", u.layer},
                      {"tensors", u.tensors},
                      {"precision", u.precision},
                      {"placement", u.placement},
                      {"weight_bytes", u.weight_bytes},
                      {"kl_int8", u.kl_int8},
                      {"kl_half", {u.kl_half[0], u.kl_half[1]}},
                      {"act_norm", u.act_norm},
                      {"ms_fp32", u.ms_fp32},
                      {"ms_int8", u.ms_int8}});
  }
  j["layers"] = layers;
  auto cands = [](const std::vector<PlanCandidate>& v, bool with_ms) {
    json a = json::array();
    for (const PlanCandidate& c : v) {
      json o = {{"type", c.type}, {"bytes", c.bytes}, {"kl", c.kl}};
      if (with_ms) {
        o["ms"] = c.ms;
        o["load_s"] = c.load_s;
      }
      a.push_back(o);
    }
    return a;
  };
  j["kv"] = {{"type", p.kv_type}, {"candidates", cands(p.kv_candidates, false)}};
  j["output"] = {{"type", p.output_type}, {"file_type", p.output_file_type},
                 {"candidates", cands(p.output_candidates, true)}};
  const PlanMemory& m = p.memory;
  j["memory"] = {{"budget", m.budget},   {"weights", m.weights},       {"kv", m.kv},
                 {"activations", m.activations}, {"buffers", m.buffers}, {"resident", m.resident},
                 {"page_cache", m.page_cache}, {"streamed", m.streamed}, {"stream_ring", m.stream_ring},
                 {"runtime", m.runtime}};
  j["prediction"] = {{"tok_s", p.pred_tok_s}, {"kl", p.pred_kl}, {"tok_s_all_fp32", p.pred_tok_s_fp32},
                     {"tok_s_all_int8", p.pred_tok_s_int8}};
  j["profile"] = {{"samples", p.samples},
                  {"tokens_per_sample", p.tokens_per_sample},
                  {"seconds", p.profile_seconds},
                  {"kl_all_int8", p.kl_all_int8},
                  {"kl_all_fp32", p.kl_all_fp32},
                  {"kl_plan", p.kl_plan},
                  {"split_half_spearman", p.spearman},
                  {"split_half_topk_overlap", p.topk_overlap}};
  if (p.measured_tok_s >= 0) {
    j["measured"] = {{"tok_s", p.measured_tok_s},
                     {"tok_s_all_fp32", p.measured_tok_s_fp32},
                     {"tok_s_all_int8", p.measured_tok_s_int8},
                     {"tok_s_cpu", p.measured_tok_s_cpu},
                     {"ppl_plan", p.ppl_plan},
                     {"ppl_fp32", p.ppl_fp32}};
  }
  return j;
}

Status PlanFromJson(const json& j, const std::string& what, Plan* out) {
  if (!j.is_object()) return InvalidFile(what + ": not a plan (expected a JSON object)");
  if (!j.contains("schema") || !j["schema"].is_string() || j["schema"].get<std::string>() != kPlanSchema) {
    return InvalidFile(what + ": not a trine plan (schema is not \"" + std::string(kPlanSchema) + "\")");
  }
  if (!j.contains("version") || !j["version"].is_number_integer()) return InvalidFile(what + ": plan has no version");
  int version = 0;
  try {
    version = IntAt<int>(j, "version");
  } catch (const BadPlanField& e) {
    return InvalidFile(what + ": bad plan version: " + e.what());
  }
  if (version > kPlanVersion) {
    return InvalidFile(what + ": plan version " + std::to_string(version) + " is newer than this trine supports (" +
                       std::to_string(kPlanVersion) + "); re-run trine profile");
  }
  if (version < 1) return InvalidFile(what + ": bad plan version " + std::to_string(version));
  try {
    Plan p;
    p.version = version;
    p.trine_version = j.at("trine_version").get<std::string>();
    const json& m = j.at("model");
    p.model_path = m.value("path", "");
    p.file_size = IntAt<uint64_t>(m, "file_size");
    p.model_hash = m.at("hash").get<std::string>();
    p.hash_method = m.value("hash_method", "");
    const json& mc = j.at("machine");
    p.isa = mc.at("isa").get<std::string>();
    p.ram_bytes = IntAt<uint64_t>(mc, "ram_bytes");
    p.n_threads = IntOr<int>(mc, "n_threads", 1);
    const json& k = j.at("key");
    p.key.mem_budget = IntAt<uint64_t>(k, "mem_budget");
    p.key.max_kl = k.at("max_kl").get<double>();
    p.key.samples = IntAt<int>(k, "samples");
    p.key.seed = IntAt<uint64_t>(k, "seed");
    p.key.n_ctx = IntAt<int>(k, "n_ctx");
    p.key.kv_type = k.at("kv_type").get<std::string>();
    p.key.output_type = k.value("output_type", std::string(version >= 2 ? "auto" : "file"));
    KvType kvt;
    p.kv_type = p.key.kv_type == "auto" ? "f16" : p.key.kv_type;
    auto read_cands = [&](const json& a, std::vector<PlanCandidate>* dst) {
      for (const json& c : a) {
        PlanCandidate pc;
        pc.type = c.at("type").get<std::string>();
        pc.bytes = IntOr<uint64_t>(c, "bytes", 0);
        pc.kl = c.value("kl", 0.0);
        pc.ms = c.value("ms", 0.0);
        pc.load_s = c.value("load_s", 0.0);
        dst->push_back(pc);
      }
    };
    if (j.contains("kv")) {
      p.kv_type = j["kv"].at("type").get<std::string>();
      if (j["kv"].contains("candidates")) read_cands(j["kv"]["candidates"], &p.kv_candidates);
    }
    if (!ParseKvType(p.kv_type, &kvt)) return InvalidFile(what + ": unknown KV cache type '" + p.kv_type + "'");
    if (j.contains("output")) {
      p.output_type = j["output"].value("type", std::string());
      p.output_file_type = j["output"].value("file_type", std::string());
      if (j["output"].contains("candidates")) read_cands(j["output"]["candidates"], &p.output_candidates);
      TypeId t;
      if (!p.output_type.empty() && !ParseTypeName(p.output_type, &t)) {
        return InvalidFile(what + ": unknown output head type '" + p.output_type + "'");
      }
    }
    p.tensors = j.at("tensors").get<std::map<std::string, std::string>>();
    for (const auto& [name, prec] : p.tensors) {
      if (prec != "int8" && prec != "fp32") return InvalidFile(what + ": tensor " + name + " has precision '" + prec + "'");
    }
    for (const json& l : j.at("layers")) {
      PlanUnit u;
      u.unit = l.at("unit").get<std::string>();
      u.layer = IntAt<int>(l, "layer");
      u.tensors = l.value("tensors", std::vector<std::string>{});
      u.precision = l.at("precision").get<std::string>();
      u.placement = l.at("placement").get<std::string>();
      if (u.placement != "resident" && u.placement != "page_cache" && u.placement != "streamed") {
        return InvalidFile(what + ": layer " + u.unit + " has placement '" + u.placement + "'");
      }
      u.weight_bytes = IntOr<uint64_t>(l, "weight_bytes", 0);
      u.kl_int8 = l.value("kl_int8", 0.0);
      if (l.contains("kl_half") && l["kl_half"].is_array() && l["kl_half"].size() == 2) {
        u.kl_half[0] = l["kl_half"][0].get<double>();
        u.kl_half[1] = l["kl_half"][1].get<double>();
      }
      u.act_norm = l.value("act_norm", 0.0);
      u.ms_fp32 = l.value("ms_fp32", 0.0);
      u.ms_int8 = l.value("ms_int8", 0.0);
      p.units.push_back(std::move(u));
    }
    const json& mem = j.at("memory");
    p.memory.budget = IntOr<uint64_t>(mem, "budget", 0);
    p.memory.weights = IntOr<uint64_t>(mem, "weights", 0);
    p.memory.kv = IntOr<uint64_t>(mem, "kv", 0);
    p.memory.activations = IntOr<uint64_t>(mem, "activations", 0);
    p.memory.buffers = IntOr<uint64_t>(mem, "buffers", 0);
    p.memory.resident = IntOr<uint64_t>(mem, "resident", 0);
    p.memory.page_cache = IntOr<uint64_t>(mem, "page_cache", 0);
    p.memory.streamed = IntOr<uint64_t>(mem, "streamed", 0);
    p.memory.stream_ring = IntOr<uint64_t>(mem, "stream_ring", 0);
    p.memory.runtime = IntOr<uint64_t>(mem, "runtime", 0);
    const json& pr = j.at("prediction");
    p.pred_tok_s = pr.value("tok_s", 0.0);
    p.pred_kl = pr.value("kl", 0.0);
    p.pred_tok_s_fp32 = pr.value("tok_s_all_fp32", 0.0);
    p.pred_tok_s_int8 = pr.value("tok_s_all_int8", 0.0);
    if (j.contains("profile")) {
      const json& pf = j["profile"];
      p.samples = IntOr<int>(pf, "samples", 0);
      p.tokens_per_sample = IntOr<int>(pf, "tokens_per_sample", 0);
      p.profile_seconds = pf.value("seconds", 0.0);
      p.kl_all_int8 = pf.value("kl_all_int8", 0.0);
      p.kl_all_fp32 = pf.value("kl_all_fp32", 0.0);
      p.kl_plan = pf.value("kl_plan", -1.0);
      p.spearman = pf.value("split_half_spearman", 0.0);
      p.topk_overlap = pf.value("split_half_topk_overlap", 0.0);
    }
    if (j.contains("measured")) {
      p.measured_tok_s = j["measured"].value("tok_s", -1.0);
      p.measured_tok_s_fp32 = j["measured"].value("tok_s_all_fp32", -1.0);
      p.measured_tok_s_int8 = j["measured"].value("tok_s_all_int8", -1.0);
      p.measured_tok_s_cpu = j["measured"].value("tok_s_cpu", -1.0);
      p.ppl_plan = j["measured"].value("ppl_plan", -1.0);
      p.ppl_fp32 = j["measured"].value("ppl_fp32", -1.0);
    }
    *out = std::move(p);
  } catch (const json::exception& e) {
    return InvalidFile(what + ": malformed plan: " + e.what());
  } catch (const BadPlanField& e) {
    return InvalidFile(what + ": malformed plan: " + e.what());
  }
  return Status::Ok();
}

Status WritePlanFile(const Plan& plan, const std::string& path) {
  std::error_code ec;
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  const std::string tmp = path + ".tmp" + std::to_string(::getpid());
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) return IoError("cannot write " + tmp + ": " + std::strerror(errno));
    f << PlanToJson(plan).dump(2) << "\n";
    if (!f) return IoError("cannot write " + tmp);
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    return IoError("cannot write " + path);
  }
  return Status::Ok();
}

Status ReadPlanFile(const std::string& path, Plan* plan) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return IoError("cannot open plan " + path + ": " + std::strerror(errno));
  std::stringstream ss;
  ss << f.rdbuf();
  const json j = json::parse(ss.str(), nullptr, false);
  if (j.is_discarded()) return InvalidFile(path + ": corrupt plan (not valid JSON)");
  return PlanFromJson(j, path, plan);
}

namespace {

constexpr uint64_t kFnvPrime = 0x100000001b3ull;

// FNV-1a style digest of one chunk: four independent lanes over 8-byte words (the multiply chain
// is the bottleneck), seeded by the chunk's ordinal, then the tail bytes.
uint64_t ChunkDigest(const uint8_t* d, uint64_t n, uint64_t ordinal) {
  const uint64_t seed = 0xcbf29ce484222325ull ^ (ordinal * 0x9e3779b97f4a7c15ull);
  uint64_t lane[4] = {seed, seed ^ 0x9e3779b97f4a7c15ull, seed ^ 0xbf58476d1ce4e5b9ull, seed ^ 0x94d049bb133111ebull};
  const uint64_t n8 = n / 8;
  uint64_t i = 0;
  for (; i + 4 <= n8; i += 4) {
    for (int k = 0; k < 4; ++k) {
      uint64_t w;
      std::memcpy(&w, d + (i + static_cast<uint64_t>(k)) * 8, 8);
      lane[k] = (lane[k] ^ w) * kFnvPrime;
    }
  }
  uint64_t h = seed;
  for (int k = 0; k < 4; ++k) h = (h ^ lane[k]) * kFnvPrime;
  for (; i < n8; ++i) {
    uint64_t w;
    std::memcpy(&w, d + i * 8, 8);
    h = (h ^ w) * kFnvPrime;
  }
  for (uint64_t b = n8 * 8; b < n; ++b) h = (h ^ d[b]) * kFnvPrime;
  return h;
}

}  // namespace

std::string ModelContentHash(const GgufFile& file, bool release_pages) {
  release_pages = release_pages && file.is_mmapped();
  // Every tensor's data in 256 KiB chunks, digested on their own, then mixed in file order. The
  // threads take groups of up to 32 consecutive chunks of one tensor (8 MiB) and, with
  // release_pages, drop each group's pages once read.
  constexpr uint64_t kChunk = 256u << 10;
  constexpr size_t kGroupChunks = 32;
  struct Chunk {
    const uint8_t* d;
    uint64_t n;
  };
  std::vector<Chunk> chunks;
  std::vector<size_t> group_start;  // first chunk of each group; a group never spans two tensors
  for (const GgufTensorInfo& t : file.tensors()) {
    if (t.data == nullptr) continue;
    for (uint64_t off = 0; off < t.n_bytes; off += kChunk) {
      if (off % (kChunk * kGroupChunks) == 0) group_start.push_back(chunks.size());
      chunks.push_back({t.data + off, std::min(kChunk, t.n_bytes - off)});
    }
  }
  group_start.push_back(chunks.size());
  std::vector<uint64_t> digest(chunks.size());
  const int64_t n_groups = static_cast<int64_t>(group_start.size()) - 1;
#pragma omp parallel for schedule(dynamic, 1) if (n_groups > 1)
  for (int64_t g = 0; g < n_groups; ++g) {
    const size_t c0 = group_start[static_cast<size_t>(g)], c1 = group_start[static_cast<size_t>(g) + 1];
    uint64_t bytes = 0;
    for (size_t c = c0; c < c1; ++c) {
      digest[c] = ChunkDigest(chunks[c].d, chunks[c].n, static_cast<uint64_t>(c));
      bytes += chunks[c].n;
    }
    if (release_pages) ReleaseFilePages(chunks[c0].d, bytes);
  }
  if (release_pages) {
    // The kernel's fault-around maps pages next to each one read, some of them in groups already
    // released: one last pass drops those too (cheap where nothing is mapped).
    for (const GgufTensorInfo& t : file.tensors()) {
      if (t.data != nullptr) ReleaseFilePages(t.data, t.n_bytes);
    }
  }
  uint64_t h = 0xcbf29ce484222325ull;
  auto mix = [&](uint64_t w) { h = (h ^ w) * kFnvPrime; };
  mix(file.file_size());
  size_t next = 0;
  for (const GgufTensorInfo& t : file.tensors()) {
    mix(t.n_bytes);
    if (t.data == nullptr) continue;
    for (uint64_t off = 0; off < t.n_bytes; off += kChunk) mix(digest[next++]);
  }
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

std::string PlanCacheDir() {
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  std::string base;
  if (xdg != nullptr && xdg[0] == '/') {
    base = xdg;
  } else {
    const char* home = std::getenv("HOME");
    base = std::string(home != nullptr && home[0] != '\0' ? home : "/tmp") + "/.cache";
  }
  return base + "/trine/plans";
}

std::string PlanCachePath(const std::string& model_hash) { return PlanCacheDir() + "/" + model_hash + ".json"; }

void SetPlanIdentity(const std::string& model_path, const std::string& model_hash, uint64_t file_size,
                     const std::string& isa, uint64_t ram_bytes, const PlanKey& key, Plan* plan) {
  plan->model_path = model_path;
  plan->model_hash = model_hash;
  plan->hash_method = kHashMethod;
  plan->file_size = file_size;
  plan->isa = isa;
  plan->ram_bytes = ram_bytes;
  plan->key = key;
}

bool PlanKeyMatches(const Plan& p, const std::string& model_hash, const std::string& isa, uint64_t ram_bytes,
                    const PlanKey& k) {
  return p.model_hash == model_hash && p.isa == isa && p.ram_bytes == ram_bytes && p.trine_version == kTrineVersion &&
         p.key.mem_budget == k.mem_budget && p.key.max_kl == k.max_kl && p.key.samples == k.samples &&
         p.key.seed == k.seed && p.key.n_ctx == k.n_ctx &&
         // A plan that chose its cache ("auto") serves a load that runs with the cache it chose.
         (p.key.kv_type == k.kv_type || (p.key.kv_type == "auto" && p.kv_type == k.kv_type)) &&
         p.key.output_type == k.output_type && p.version == kPlanVersion;
}

std::string MachineIsa() { return kernels::IsaName(kernels::ActiveIsa()); }

namespace {
uint64_t MeminfoKb(const char* key) {
  std::ifstream f("/proc/meminfo");
  std::string line;
  const size_t n = std::strlen(key);
  while (std::getline(f, line)) {
    if (line.compare(0, n, key) == 0 && line.size() > n && line[n] == ':') {
      return std::strtoull(line.c_str() + n + 1, nullptr, 10);
    }
  }
  return 0;
}
}  // namespace

uint64_t MachineRamBytes() { return MeminfoKb("MemTotal") * 1024; }

uint64_t MachineAvailableBytes() {
  const uint64_t a = MeminfoKb("MemAvailable") * 1024;
  return a != 0 ? a : MachineRamBytes() / 2;
}

std::vector<std::string> PlanF32Tensors(const Plan& plan) {
  std::vector<std::string> out;
  for (const auto& [name, prec] : plan.tensors) {
    if (prec == "fp32") out.push_back(name);
  }
  return out;
}

KvType PlanKvType(const Plan& plan) {
  KvType t = KvType::kF16;
  if (!ParseKvType(plan.kv_type, &t)) t = KvType::kF16;
  return t;
}

TypeId PlanOutputType(const Plan& plan) {
  TypeId t = TypeId::kCount;
  if (plan.output_type.empty() || plan.output_type == plan.output_file_type) return TypeId::kCount;
  if (!ParseTypeName(plan.output_type, &t)) return TypeId::kCount;
  return t;
}

Status ApplyPlanPrecisions(const Plan& plan, Model* model) {
  TypeId head = PlanOutputType(plan);
  if (head == TypeId::kCount) head = model->output_file_type();
  if (model->output_type() != head) {
    Status s = model->SetOutputType(head);
    if (!s.ok()) return InvalidArgument("plan does not fit this model: " + s.message());
  }
  for (const auto& [name, prec] : plan.tensors) {
    Status s = model->SetF32Activations(name, prec != "int8");
    if (!s.ok()) return InvalidArgument("plan does not fit this model: " + s.message());
  }
  return Status::Ok();
}

Status PlanPlacements(const Plan& plan, int n_layer, std::vector<Placement>* out) {
  out->assign(static_cast<size_t>(n_layer), Placement::kPageCache);
  for (const PlanUnit& u : plan.units) {
    if (u.layer < 0) continue;
    if (u.layer >= n_layer) {
      return InvalidArgument("plan does not fit this model: unit " + u.unit + " but the model has " +
                             std::to_string(n_layer) + " layers");
    }
    Placement p;
    if (!ParsePlacement(u.placement, &p)) return InvalidArgument("plan: unit " + u.unit + " has placement '" + u.placement + "'");
    (*out)[static_cast<size_t>(u.layer)] = p;
  }
  return Status::Ok();
}

Status ApplyPlan(const Plan& plan, Model* model, bool try_mlock, std::string* summary) {
  TRINE_RETURN_IF_ERROR(ApplyPlanPrecisions(plan, model));
  model->DropSpareOutputHead();  // the plan's head is the one that stays
  std::vector<Placement> placements;
  TRINE_RETURN_IF_ERROR(PlanPlacements(plan, model->config().n_layer, &placements));
  const int locked0 = model->mlock_ok(), failed0 = model->mlock_failed();
  int n[3] = {0, 0, 0};
  for (size_t l = 0; l < placements.size(); ++l) {
    TRINE_RETURN_IF_ERROR(model->SetLayerPlacement(static_cast<int>(l), placements[l], try_mlock));
    ++n[static_cast<int>(placements[l])];
  }
  if (summary != nullptr) {
    *summary = std::to_string(plan.tensors.size()) + " tensor precisions set, head " +
               TypeName(model->output_type()) + ", KV cache " + plan.kv_type + ", layers " +
               std::to_string(n[static_cast<int>(Placement::kResident)]) + " resident / " +
               std::to_string(n[static_cast<int>(Placement::kPageCache)]) + " page cache / " +
               std::to_string(n[static_cast<int>(Placement::kStreamed)]) + " streamed";
    if (try_mlock) {
      *summary += ", " + std::to_string(model->mlock_ok() - locked0) + " matrices locked (" +
                  std::to_string(model->mlock_failed() - failed0) + " mlock failures)";
    }
  }
  return Status::Ok();
}

namespace {
std::string Mib(uint64_t b) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(b) / (1024.0 * 1024.0));
  return buf;
}
}  // namespace

std::string PlanSummary(const Plan& p) {
  int n_int8 = 0, n_fp32 = 0, n_res = 0, n_pc = 0, n_str = 0;
  for (const PlanUnit& u : p.units) {
    (u.precision == "int8" ? n_int8 : n_fp32) += 1;
    if (u.layer < 0) continue;
    if (u.placement == "resident") ++n_res;
    if (u.placement == "page_cache") ++n_pc;
    if (u.placement == "streamed") ++n_str;
  }
  const PlanMemory& m = p.memory;
  const uint64_t planned = m.runtime + m.resident + m.page_cache + m.kv + m.activations + m.buffers + m.stream_ring;
  std::string s = "plan: layers " + std::to_string(n_res) + " resident / " + std::to_string(n_pc) + " page cache / " +
                  std::to_string(n_str) + " streamed";
  if (n_str > 0) s += " (ring " + Mib(m.stream_ring) + ")";
  s += "; units " + std::to_string(n_int8) + " int8 / " + std::to_string(n_fp32) + " fp32";
  if (!p.kv_type.empty()) s += "; KV cache " + p.kv_type;
  s += "; memory " + Mib(planned) + " of " + Mib(m.budget) + " budget (weights " + Mib(m.weights) + ")";
  if (planned > m.budget) s += ", OVER BUDGET by this estimate: head, KV cache, buffers (batch <= 512) and runtime alone do not fit";
  if (p.samples == 0) s += "; not profiled (placement only)";
  return s;
}

}  // namespace trine::profiler
