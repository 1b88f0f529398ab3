// Loading a model under a plan (budget, cached plan, plan file or a profile at load).
#include "profiler/plan_load.h"

#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "core/page_memory.h"
#include "profiler/profiler.h"

namespace trine::profiler {

uint64_t ParseMemBudget(const std::string& s) {
  if (s.empty()) return 0;
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(s.c_str(), &end);
  if (errno != 0 || end == s.c_str() || !(v > 0) || !std::isfinite(v)) return 0;
  const std::string unit = end;
  double mult = 1;
  if (unit == "%") {
    if (v > 100) return 0;
    return static_cast<uint64_t>(static_cast<double>(MachineRamBytes()) * v / 100.0);
  }
  if (unit == "" || unit == "B") {
    mult = 1;
  } else if (unit == "K" || unit == "KiB") {
    mult = 1024.0;
  } else if (unit == "M" || unit == "MiB") {
    mult = 1024.0 * 1024;
  } else if (unit == "G" || unit == "GiB") {
    mult = 1024.0 * 1024 * 1024;
  } else {
    return 0;
  }
  return static_cast<uint64_t>(v * mult);
}

Status PlanWithoutProfile(const GgufFile& f, const ModelConfig& c, Plan* plan) {
  static const char* const kMatrices[] = {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"};
  plan->units.clear();
  plan->tensors.clear();
  uint64_t unit_bytes = 0;
  auto add = [&](PlanUnit* u, const std::string& name) -> Status {
    const GgufTensorInfo* t = f.FindTensor(name);
    if (t == nullptr) return InvalidFile(f.path() + ": missing tensor '" + name + "'");
    u->tensors.push_back(name);
    u->weight_bytes += t->n_bytes;
    unit_bytes += t->n_bytes;
    plan->tensors[name] = "int8";
    return Status::Ok();
  };
  for (int l = 0; l < c.n_layer; ++l) {
    PlanUnit u;
    u.unit = "blk." + std::to_string(l);
    u.layer = l;
    u.precision = "int8";
    for (const char* m : kMatrices) TRINE_RETURN_IF_ERROR(add(&u, u.unit + "." + m + ".weight"));
    plan->units.push_back(std::move(u));
  }
  PlanUnit head;
  head.unit = "output";
  head.layer = -1;
  head.precision = "int8";
  TRINE_RETURN_IF_ERROR(add(&head, c.tied_output ? "token_embd.weight" : "output.weight"));
  plan->units.push_back(std::move(head));
  uint64_t total = 0;
  for (const GgufTensorInfo& t : f.tensors()) total += t.n_bytes;
  plan->samples = 0;
  plan->pred_tok_s = plan->pred_tok_s_fp32 = plan->pred_tok_s_int8 = 0;
  plan->pred_kl = 0;
  PlacePlan(c, total > unit_bytes ? total - unit_bytes : 0, plan);
  return Status::Ok();
}

Status LoadModelWithPlan(const std::string& path, ModelLoadOptions lo, const PlanRequest& req,
                         std::unique_ptr<Model>* out, PlanOutcome* outcome) {
  *outcome = PlanOutcome();
  if (!req.active()) return Model::Load(path, lo, out);
  Plan given;
  if (!req.plan_path.empty()) TRINE_RETURN_IF_ERROR(ReadPlanFile(req.plan_path, &given));

  Plan plan;
  std::string source;
  bool profile = false;
  std::string cache_path;
  PlanKey key;
  key.mem_budget = req.mem_budget;
  key.kv_type = KvTypeName(req.kv_type);
  const std::string isa = MachineIsa();
  const uint64_t ram = MachineRamBytes();
  lo.mlock_resident = req.mlock;
  lo.placement_hook = [&](const GgufFile& f, const ModelConfig& c, std::vector<Placement>* placements) -> Status {
    // What the process holds before any weight (code, the file's metadata, the vocabulary).
    const uint64_t runtime = ProcessRssBytes();
    const std::string hash = ModelContentHash(f, /*release_pages=*/true);
    key.n_ctx = req.n_ctx > 0 ? req.n_ctx : std::min(c.n_ctx_train, 4096);
    cache_path = PlanCachePath(hash);
    if (!req.plan_path.empty()) {
      if (given.model_hash != hash) {
        return InvalidArgument(req.plan_path + ": the plan is for another model (hash " + given.model_hash +
                               "), this model's hash is " + hash);
      }
      plan = given;
      source = "plan file " + req.plan_path;
    } else {
      bool hit = false;
      if (!req.no_cache && ::access(cache_path.c_str(), F_OK) == 0) {
        Plan cached;
        if (ReadPlanFile(cache_path, &cached).ok() && PlanKeyMatches(cached, hash, isa, ram, key)) {
          plan = std::move(cached);
          hit = true;
          source = "plan cache " + cache_path;
        }
      }
      if (!hit) {
        plan = Plan();
        SetPlanIdentity(path, hash, f.file_size(), isa, ram, key, &plan);
        plan.memory.runtime = runtime;
        TRINE_RETURN_IF_ERROR(PlanWithoutProfile(f, c, &plan));
        profile = req.auto_plan;
        source = profile ? "profiled" : "budget only (not profiled; --auto profiles)";
      }
    }
    return PlanPlacements(plan, c.n_layer, placements);
  };
  std::unique_ptr<Model> model;
  TRINE_RETURN_IF_ERROR(Model::Load(path, lo, &model));
  bool placements_changed = false;
  if (profile) {
    ProfileOptions po;
    po.samples = plan.key.samples;
    po.seed = plan.key.seed;
    po.n_threads = req.n_threads;
    po.kv_type = req.kv_type;
    po.progress = req.progress;
    TRINE_RETURN_IF_ERROR(ProfileModel(model.get(), po, &plan));
    Status st = WritePlanFile(plan, cache_path);
    source = "profiled in " + std::to_string(plan.profile_seconds).substr(0, 5) + " s" +
             (st.ok() ? ", cached at " + cache_path : ", not cached: " + st.message());
    placements_changed = true;
  }
  std::string applied;
  TRINE_RETURN_IF_ERROR(ApplyPlan(plan, model.get(), placements_changed && req.mlock, &applied));
  outcome->active = true;
  outcome->source = source;
  outcome->summary = PlanSummary(plan) + "; " + source;
  if (req.mlock) {
    outcome->summary += "; " + std::to_string(model->mlock_ok()) + " matrices locked, " +
                        std::to_string(model->mlock_failed()) + " mlock failures";
  }
  outcome->plan = std::move(plan);
  *out = std::move(model);
  return Status::Ok();
}

}  // namespace trine::profiler
