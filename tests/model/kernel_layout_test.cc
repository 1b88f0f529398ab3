// What `trine inspect --kernels` reports in brackets for each weight matrix (KernelBinding::layout):
// the form the kernel reads, against the file's bytes. Expected values follow from the ISA level
// the model picked: a 16-row interleave where the AVX-512 kernels read one, a TQ2_0 repack where
// TQ1_0 is not read in place, the mapped rows otherwise; a requantized head names its source type.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/test_util.h"
#include "repack.h"
#include "model/model.h"
#include "tensor/dtype.h"

namespace trine {
namespace {

std::unique_ptr<Model> LoadModel(const char* file) {
  std::unique_ptr<Model> model;
  const Status st = Model::Load(testing::ModelPath(file), ModelLoadOptions(), &model);
  EXPECT_TRUE(st.ok()) << st.message();
  return model;
}

// The layout the loader gives a block matrix of `file` at the model's ISA level.
std::string ExpectedBlockLayout(const Model& m, const GgufTensorInfo& t) {
  const int64_t elems = kernels::X16BlockElems(t.type);
  const bool x16_in_place = kernels::WantsX16(t.type, m.isa(), kernels::TernaryVariant::kDefault) && elems > 0 &&
                            t.ne[0] % elems == 0;
  // The lookup-table kernels' layout (TRINE_TERNARY=lut on AVX2 / NEON) for TQ2_0 rows.
  const bool lut = kernels::WantsLutLayout(TypeId::kTQ2_0, m.isa(), kernels::TernaryVariant::kDefault) &&
                   t.ne[0] % kernels::X16BlockElems(TypeId::kTQ2_0) == 0;
  if (t.type == TypeId::kTQ1_0 && !x16_in_place) {
    const bool tq2_x16 = kernels::WantsX16(TypeId::kTQ2_0, m.isa(), kernels::TernaryVariant::kDefault) &&
                         t.ne[0] % kernels::X16BlockElems(TypeId::kTQ2_0) == 0;
    return std::string("repacked from tq1_0") + (tq2_x16 ? ", 16-row interleave" : lut ? ", lookup-table layout" : "");
  }
  if (t.type == TypeId::kTQ2_0 && lut) return "lookup-table layout";
  return x16_in_place ? "16-row interleave" : "mapped";
}

TEST(KernelLayout, BlockMatricesNameTheirLayout) {
  for (const char* file : {"tiny-tern-tq1_0-e8.gguf", "tiny-tern-q4_0.gguf", "tiny-tern-q8_0.gguf"}) {
    SCOPED_TRACE(file);
    std::unique_ptr<Model> model = LoadModel(file);
    ASSERT_NE(model, nullptr);
    int checked = 0;
    for (const KernelBinding& b : model->bindings()) {
      if (b.tensor.rfind("blk.", 0) != 0) continue;
      const GgufTensorInfo* t = model->file().FindTensor(b.tensor);
      ASSERT_NE(t, nullptr) << b.tensor;
      EXPECT_EQ(b.layout, ExpectedBlockLayout(*model, *t)) << b.tensor << " (" << TypeName(t->type) << ")";
      ++checked;
    }
    EXPECT_GT(checked, 0);
  }
}

TEST(KernelLayout, StreamedLayerSaysSoAndComesBack) {
  std::unique_ptr<Model> model = LoadModel("tiny-tern-tq1_0-e8.gguf");
  ASSERT_NE(model, nullptr);
  auto layouts = [&]() {
    std::vector<std::string> v;
    for (const KernelBinding& b : model->bindings()) {
      if (b.tensor.rfind("blk.0.", 0) == 0) v.push_back(b.layout);
    }
    return v;
  };
  const std::vector<std::string> resident = layouts();
  ASSERT_FALSE(resident.empty());
  ASSERT_TRUE(model->SetLayerPlacement(0, Placement::kStreamed, false).ok());
  for (const std::string& l : layouts()) EXPECT_EQ(l, "streamed from disk, repacked from tq1_0");
  ASSERT_TRUE(model->SetLayerPlacement(0, Placement::kResident, false).ok());
  EXPECT_EQ(layouts(), resident);
}

// The lookup variant's layout where the ISA level has the lookup kernels (AVX2, NEON; run by
// the ctest parity_lut_avx2 with TRINE_ISA=avx2): repacked TQ1_0 in the lookup-table layout; a
// streamed layer gets plain rows and its layout back when resident again.
TEST(KernelLayout, LookupVariantNamesItsLayout) {
  ModelLoadOptions o;
  o.ternary_variant = kernels::TernaryVariant::kLut;
  std::unique_ptr<Model> model;
  const Status st = Model::Load(testing::ModelPath("tiny-tern-tq1_0-e8.gguf"), o, &model);
  ASSERT_TRUE(st.ok()) << st.message();
  if (!kernels::WantsLutLayout(TypeId::kTQ2_0, model->isa(), kernels::TernaryVariant::kLut)) {
    GTEST_SKIP() << kernels::IsaName(model->isa()) << " has no lookup-table kernel (AVX2 and NEON do); ctest "
                    "parity_lut_avx2 runs this test with TRINE_ISA=avx2";
  }
  auto layouts = [&]() {
    std::vector<std::string> v;
    for (const KernelBinding& b : model->bindings()) {
      if (b.tensor.rfind("blk.0.", 0) == 0) v.push_back(b.layout);
    }
    return v;
  };
  const std::vector<std::string> resident = layouts();
  ASSERT_FALSE(resident.empty());
  for (const std::string& l : resident) EXPECT_EQ(l, "repacked from tq1_0, lookup-table layout");
  ASSERT_TRUE(model->SetLayerPlacement(0, Placement::kStreamed, false).ok());
  for (const std::string& l : layouts()) EXPECT_EQ(l, "streamed from disk, repacked from tq1_0");
  ASSERT_TRUE(model->SetLayerPlacement(0, Placement::kResident, false).ok());
  EXPECT_EQ(layouts(), resident);
}

TEST(KernelLayout, RequantizedHeadNamesItsSourceType) {
  std::unique_ptr<Model> model = LoadModel("tiny-tern-tq2_0.gguf");
  ASSERT_NE(model, nullptr);
  const std::string head = model->config().tied_output ? "token_embd.weight" : "output.weight";
  auto layout = [&]() {
    for (const KernelBinding& b : model->bindings()) {
      if (b.tensor == head) return b.layout;
    }
    return std::string("(no binding)");
  };
  const std::string file_layout = layout();
  const std::string file_type = TypeName(model->output_file_type());
  // The file's head is read in the kernel's interleave, or as a copy / the mapped rows.
  EXPECT_TRUE(file_layout == "16-row interleave" || file_layout == "copied" || file_layout == "mapped")
      << file_layout;
  ASSERT_TRUE(model->SetOutputType(TypeId::kQ8_0).ok());
  const std::string want = "requantized from " + file_type +
                           (model->output().interleave == 16 ? ", 16-row interleave" : "");
  EXPECT_EQ(layout(), want);
  ASSERT_TRUE(model->SetOutputType(model->output_file_type()).ok());
  EXPECT_EQ(layout(), file_layout);
}

}  // namespace
}  // namespace trine
