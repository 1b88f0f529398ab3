// The file's output head (here the tied Q6_K embedding of tiny-tern-tq2_0, 6.7 MB) is copied at
// load (Model::CopyFileHead): into the 16-row interleave where its kernel reads that (Q6_K on
// AVX-512; the embedding lookup then gathers its rows from the copy), else plainly onto huge
// pages, shared with the embedding. A requantized head made permanent (DropSpareOutputHead) hands the
// copy back to the mapping.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "common/test_util.h"
#include "core/page_buffer.h"
#include "model/model.h"
#include "tensor/dtype.h"

namespace trine {
namespace {

TEST(HeadCopy, TiedHeadIsCopiedAndSharedWithTheEmbedding) {
  std::unique_ptr<Model> model;
  ASSERT_TRUE(Model::Load(testing::ModelPath("tiny-tern-tq2_0.gguf"), ModelLoadOptions(), &model).ok());
  ASSERT_TRUE(model->config().tied_output);
  const GgufTensorInfo* t = model->file().FindTensor("token_embd.weight");
  ASSERT_NE(t, nullptr);
  const kernels::WeightView& head = model->output();
  ASSERT_EQ(static_cast<size_t>(head.rows) * head.row_bytes, t->n_bytes);
  // The head's rows are the file's whichever layout holds them.
  std::vector<uint8_t> scratch(head.row_bytes);
  for (int64_t r : {int64_t{0}, int64_t{1}, head.rows / 2, head.rows - 1}) {
    const uint8_t* row = kernels::RowData(head, r, scratch.data());
    EXPECT_EQ(std::memcmp(row, t->data + static_cast<size_t>(r) * head.row_bytes, head.row_bytes), 0) << "row " << r;
  }
  if (head.interleave == 16) {
    // Q6_K on AVX-512: the copy is the kernel's 16-row interleave; the embedding's view keeps the
    // file's address, but its rows are gathered from the copy: the same values.
    EXPECT_EQ(model->token_embd().data, t->data);
    const TypeTraits& tr = GetTypeTraits(head.type);
    std::vector<float> from_file(static_cast<size_t>(head.cols)), embedded(static_cast<size_t>(head.cols));
    for (int64_t r : {int64_t{0}, int64_t{17}, head.rows - 1}) {
      tr.dequantize_row(t->data + static_cast<size_t>(r) * head.row_bytes, from_file.data(), head.cols);
      model->EmbedToken(static_cast<int32_t>(r), embedded.data());
      EXPECT_EQ(std::memcmp(from_file.data(), embedded.data(), from_file.size() * sizeof(float)), 0) << "token " << r;
    }
  } else if (!HugePagesEnabled()) {
    EXPECT_EQ(head.data, t->data);
    EXPECT_EQ(model->token_embd().data, head.data);
    GTEST_SKIP() << "transparent huge pages are off here (or TRINE_HUGE_PAGES=0): the head stays mapped";
  } else {
    // A plain copy on huge pages, shared with the embedding.
    EXPECT_NE(head.data, t->data);
    EXPECT_EQ(model->token_embd().data, head.data);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(head.data) % PageBuffer::kHugePage, 0u);
  }

  // A requantized head made permanent: the file's head goes back to the mapped bytes.
  ASSERT_TRUE(model->SetOutputType(TypeId::kQ8_0).ok());
  model->DropSpareOutputHead();
  EXPECT_EQ(model->token_embd().data, t->data);
  ASSERT_TRUE(model->SetOutputType(model->output_file_type()).ok());
  EXPECT_EQ(model->output().data, t->data);
  EXPECT_EQ(model->output().interleave, 0);
}

}  // namespace
}  // namespace trine
