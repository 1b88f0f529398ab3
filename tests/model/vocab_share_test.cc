// A loaded model keeps one vocabulary: the tokenizers built over it share it (Model::shared_vocab)
// instead of copying it, and the file's parsed token/merge arrays it was built from are dropped
// (GgufFile::DropMetadata). For Llama 3's 128k-token vocabulary that is ~35 MB less resident.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "common/test_util.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace trine {
namespace {

TEST(VocabShare, TokenizerSharesTheModelsVocabulary) {
  std::unique_ptr<Model> model;
  ASSERT_TRUE(Model::Load(testing::ModelPath("tiny-tern-tq2_0.gguf"), ModelLoadOptions(), &model).ok());
  ASSERT_GT(model->vocab().size(), 0);
  EXPECT_EQ(model->shared_vocab().get(), &model->vocab());
  for (const char* key : {"tokenizer.ggml.tokens", "tokenizer.ggml.merges", "tokenizer.ggml.scores",
                          "tokenizer.ggml.token_type"}) {
    EXPECT_EQ(model->file().Find(key), nullptr) << key;
  }
  EXPECT_NE(model->file().Find("tokenizer.ggml.model"), nullptr);  // the small keys stay

  std::unique_ptr<Tokenizer> tok;
  ASSERT_TRUE(Tokenizer::Create(model->shared_vocab(), &tok).ok());
  EXPECT_EQ(&tok->vocab(), &model->vocab());

  // The same ids as a tokenizer read from the file on its own (which still has every key).
  std::unique_ptr<GgufFile> file;
  ASSERT_TRUE(GgufFile::Open(testing::ModelPath("tiny-tern-tq2_0.gguf"), &file).ok());
  std::unique_ptr<Tokenizer> own;
  ASSERT_TRUE(Tokenizer::FromGguf(*file, &own).ok());
  std::vector<TokenId> a, b;
  const std::string text = "Hello world, once upon a time there was a small dog.";
  ASSERT_TRUE(tok->Tokenize(text, true, false, &a).ok());
  ASSERT_TRUE(own->Tokenize(text, true, false, &b).ok());
  EXPECT_GT(a.size(), 5u);
  EXPECT_EQ(a, b);

  // The vocabulary outlives the model for a tokenizer that holds it.
  model.reset();
  ASSERT_TRUE(tok->Tokenize(text, true, false, &a).ok());
  EXPECT_EQ(a, b);
}

TEST(VocabShare, NullVocabularyIsRefused) {
  std::unique_ptr<Tokenizer> tok;
  const Status st = Tokenizer::Create(nullptr, &tok);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(tok, nullptr);
}

}  // namespace
}  // namespace trine
