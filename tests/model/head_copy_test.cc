// The file's output head (here the tied Q6_K embedding of tiny-tern-tq2_0, 6.7 MB) is copied to
// huge pages at load (Model::CopyFileHeadToHugePages); the embedding lookup reads the same copy,
// and a requantized head made permanent (DropSpareOutputHead) hands the copy back to the mapping.
#include <gtest/gtest.h>

#include <cstring>

#include "common/test_util.h"
#include "core/page_buffer.h"
#include "model/model.h"

namespace trine {
namespace {

TEST(HeadCopy, TiedHeadIsCopiedAndSharedWithTheEmbedding) {
  std::unique_ptr<Model> model;
  ASSERT_TRUE(Model::Load(testing::ModelPath("tiny-tern-tq2_0.gguf"), ModelLoadOptions(), &model).ok());
  ASSERT_TRUE(model->config().tied_output);
  const GgufTensorInfo* t = model->file().FindTensor("token_embd.weight");
  ASSERT_NE(t, nullptr);
  const kernels::WeightView& head = model->output();
  const size_t bytes = static_cast<size_t>(head.rows) * head.row_bytes;
  ASSERT_EQ(bytes, t->n_bytes);
  // Same bytes as the file either way, and one buffer for the head and the embedding.
  EXPECT_EQ(std::memcmp(head.data, t->data, bytes), 0);
  EXPECT_EQ(model->token_embd().data, head.data);
  if (!HugePagesEnabled()) {
    EXPECT_EQ(head.data, t->data);
    GTEST_SKIP() << "transparent huge pages are off here (or TRINE_HUGE_PAGES=0): the head stays mapped";
  }
  EXPECT_NE(head.data, t->data);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(head.data) % PageBuffer::kHugePage, 0u);

  // A requantized head made permanent: the file's head goes back to the mapped bytes.
  ASSERT_TRUE(model->SetOutputType(TypeId::kQ8_0).ok());
  model->DropSpareOutputHead();
  EXPECT_EQ(model->token_embd().data, t->data);
  ASSERT_TRUE(model->SetOutputType(model->output_file_type()).ok());
  EXPECT_EQ(model->output().data, t->data);
}

}  // namespace
}  // namespace trine
