// libFuzzer target for plan files (`trine generate/profile --plan FILE`, the plan cache): any
// bytes through ReadPlanFile, and parsed plans applied to the bundled model.
// Invariants: an error names the file; an accepted plan survives PlanToJson -> PlanFromJson
// unchanged (so what trine writes it reads back); applying an accepted plan to a model it was
// not made for either works or fails with a message, never a crash.
#include <memory>
#include <string>

#include "fuzz_util.h"
#include "model/model.h"
#include "profiler/plan.h"

namespace {

using trine::fuzz::Check;

trine::Model* SharedModel() {
  static trine::Model* model = [] {
    std::unique_ptr<trine::Model> m;
    Check(trine::Model::Load(trine::fuzz::ModelPath("bitnet-tiny-stories-TQ2_0-f16emb.gguf"), {}, &m).ok(),
          "bundled model loads");
    return m.release();
  }();
  return model;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 65536) return 0;
  const std::string path = trine::fuzz::ScratchPath(".plan.json");
  if (!trine::fuzz::WriteFile(path, data, size)) return 0;
  trine::profiler::Plan plan;
  const trine::Status st = trine::profiler::ReadPlanFile(path, &plan);
  if (!st.ok()) {
    Check(st.message().find(path) != std::string::npos, "plan error names the file");
    return 0;
  }
  const nlohmann::json j = trine::profiler::PlanToJson(plan);
  trine::profiler::Plan again;
  Check(trine::profiler::PlanFromJson(j, "round trip", &again).ok(), "a written plan reads back");
  Check(trine::profiler::PlanToJson(again) == j, "plan JSON round trip is stable");

  std::string summary;
  const trine::Status applied = trine::profiler::ApplyPlan(plan, SharedModel(), /*try_mlock=*/false, &summary);
  Check(applied.ok() || !applied.message().empty(), "a rejected plan says why");
  return 0;
}
