// Loading a model under a plan: what `trine generate --mem-budget/--auto/--plan` and the C API's
// trine_model_params (mem_budget_bytes, plan_path, auto_plan) do. The plan is resolved inside
// Model::Load (ModelLoadOptions::placement_hook), after the header is read and before any weight
// is bound, so that streamed layers are never mapped or repacked:
//   1. --plan FILE: that plan (its model hash must be this file's).
//   2. else the plan cache ($XDG_CACHE_HOME/trine/plans/<hash>.json) when its key matches (budget,
//      n_ctx, KV type, profile defaults; see PlanKeyMatches), unless no_cache.
//   3. else with auto_plan: a budget-only plan for the load, then a profile of the loaded model
//      (whose forward passes already stream), whose plan is applied and cached.
//   4. else (a budget alone): a budget-only plan, not profiled and not cached: every unit int8 (the
//      runtime's default), layers placed in order under the budget (PlacePlan).
// The content hash reads the whole file once, releasing its pages as it goes.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "core/status.h"
#include "model/model.h"
#include "profiler/plan.h"
#include "runtime/context.h"

namespace trine::profiler {

struct PlanRequest {
  uint64_t mem_budget = 0;  // bytes; 0: none given (with auto_plan: MemAvailable)
  bool auto_plan = false;   // profile when no cached plan matches
  std::string plan_path;    // use this plan file
  bool no_cache = false;    // ignore the cache (a profile still refreshes it)
  bool mlock = false;       // mlock resident layers
  int n_ctx = 0;            // the context the KV cache is budgeted for (0: training, <= 4096)
  KvType kv_type = KvType::kF16;
  int n_threads = 0;        // for profiling
  // Profiling progress (may be empty; false stops the profile: the load fails with kCancelled).
  std::function<bool(float, const std::string&)> progress;

  bool active() const { return mem_budget != 0 || auto_plan || !plan_path.empty(); }
};

struct PlanOutcome {
  bool active = false;  // a plan was applied
  Plan plan;
  std::string source;   // "plan file X", "plan cache X", "profiled in N s", "budget only"
  std::string summary;  // PlanSummary + "; " + source
};

// Loads `path` with `options` and, when request.active(), under a plan as above.
Status LoadModelWithPlan(const std::string& path, ModelLoadOptions options, const PlanRequest& request,
                         std::unique_ptr<Model>* out, PlanOutcome* outcome);

// A plan from the file alone (no profile): units as the profiler builds them (each layer's seven
// matrices, the head), all int8, placed by PlacePlan under plan->key. plan->key must be set.
Status PlanWithoutProfile(const GgufFile& file, const ModelConfig& config, Plan* plan);

// "123456", "512M", "2G" (K/M/G and KiB/MiB/GiB are powers of 1024), "50%" (of MemTotal).
// 0 when invalid.
uint64_t ParseMemBudget(const std::string& s);

}  // namespace trine::profiler
