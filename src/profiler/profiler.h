// Load-time profiler (MCAP-style, measured): Monte Carlo samples through the model to measure, per
// unit (each transformer layer, and the output head), the KL divergence of the next-token
// distributions between the unit with fp32 activations and the unit with quantized (int8/fp16)
// activations, everything else at the runtime's default (quantized) precision; MCAP's
// activation-norm score (mean |x| of the unit's input) for comparison; and the unit's decode time
// per token in each precision. Then a planner picks per-unit precision and per-layer placement.
//
// Why the baseline is the quantized model and a unit is switched UP to fp32, rather than the
// fp32 model with one unit switched down: the layers after the unit then run the fast integer
// kernels, and for perturbations this small the two KLs agree to second order (both are the
// unit's activation-rounding error carried to the logits). The runs resume at the unit's layer
// from the baseline's recorded residual stream (the layers before it are unchanged), so the
// sensitivity of all L layers costs (L + 1) / 2 forward passes. One fp32 pass measures what int8
// everywhere costs (kl_all_int8) and checks the plan (kl_plan), both against true fp32.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/status.h"
#include "model/model.h"
#include "profiler/plan.h"
#include "runtime/context.h"

namespace trine::profiler {

struct ProfileOptions {
  int samples = 8;
  uint64_t seed = 1;
  int n_threads = 0;  // 0: all cores
  KvType kv_type = KvType::kF16;
  int sample_tokens = 8;      // tokens per sample (random ones: BOS first; texts cut to this)
  int scored_positions = 4;   // last positions of each sample whose distributions are compared
  // Called with (fraction done, stage); may be empty. Returning false stops the profile
  // (ProfileModel then returns kCancelled).
  std::function<bool(float, const std::string&)> progress;
};

// Profiles `model` (its activation precisions are restored afterwards): fills plan->units (kl,
// norms, timings, bytes), the profile fields and the predicted fp32 speed, then plans
// (PlanFromProfile with plan->key) and measures the plan's KL against the fp32 run (kl_plan).
// Samples are options.sample_tokens long: random (BOS first) or built-in short texts (every 4th
// sample, starting with the 2nd).
Status ProfileModel(Model* model, const ProfileOptions& options, Plan* plan);

// The Monte Carlo samples ProfileModel and MeasurePlanKl use for these options (token ids).
std::vector<std::vector<int32_t>> ProfileSamples(const Model& model, const ProfileOptions& options);

// Chooses precisions (greedy by KL per ms saved under key.max_kl) and placements (most important
// layers resident first, under key.mem_budget) for the profiled units; fills tensors, memory and
// the prediction. Pure: works on synthetic profiles too.
void PlanFromProfile(const ModelConfig& config, uint64_t other_weight_bytes, Plan* plan);

// A uniform plan without profiling (for comparisons): every matrix int8 (the runtime's default
// quantized activations) or fp32 activations, the head in `head` (kCount: the file's type), the
// KV cache in `kv`; memory and placements computed as PlanFromProfile does under plan->key.
Status UniformPlan(Model* model, bool int8, TypeId head, KvType kv, Plan* plan);

// Ring buffers the planner reserves for streamed layers (ContextParams::stream_slots' default).
inline constexpr uint64_t kStreamSlots = 2;

// The placement half of PlanFromProfile: memory estimates and per-layer placement under
// key.mem_budget (most sensitive layers resident first; the head always resident; when some
// layers must be streamed, kStreamSlots x the largest layer is reserved for the ring first).
// plan->memory.runtime (the process's memory besides the model, measured by the caller; kept)
// counts against the budget too.
void PlacePlan(const ModelConfig& config, uint64_t other_weight_bytes, Plan* plan);

// Mean KL(fp32 run || plan) over the samples with the plan's precisions applied (the model's
// precisions are restored afterwards). Used to check a plan and for kl_all_fp32.
Status MeasurePlanKl(Model* model, const ProfileOptions& options, const Plan& plan, double* kl);

// Single-token decode speed (tok/s) of the model as it is now: `n` tokens after a short prompt;
// also tokens per second of process CPU time (*cpu_tok_s; with one thread, steadier than wall
// time on a machine other processes share).
Status MeasureDecodeSpeed(const Model& model, int n_threads, KvType kv_type, int n, double* tok_s, double* cpu_tok_s);

// Spearman rank correlation of two equally long score vectors (ties get average ranks).
double Spearman(const std::vector<double>& a, const std::vector<double>& b);
// |top-k(a) ∩ top-k(b)| / k.
double TopKOverlap(const std::vector<double>& a, const std::vector<double>& b, int k);

}  // namespace trine::profiler
