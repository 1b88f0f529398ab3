// GGUF writer -> reader round trips, and reading the shipped llama.cpp-written files.
#include <gtest/gtest.h>

#include "common/test_util.h"
#include "gguf/gguf_reader.h"
#include "gguf/gguf_writer.h"

namespace trine {
namespace {

using testing::ModelPath;
using testing::TempPath;

TEST(GgufRoundTrip, AllValueTypesAndTensors) {
  GgufWriter w;
  w.Set("general.architecture", GgufValue::String("llama"));
  w.Set("a.u8", GgufValue::U8(200));
  w.Set("a.i8", GgufValue::I8(-5));
  w.Set("a.u16", GgufValue::U16(65000));
  w.Set("a.i16", GgufValue::I16(-30000));
  w.Set("a.u32", GgufValue::U32(4000000000u));
  w.Set("a.i32", GgufValue::I32(-2000000000));
  w.Set("a.u64", GgufValue::U64(18000000000000000000ull));
  w.Set("a.i64", GgufValue::I64(-9000000000000000000ll));
  w.Set("a.f32", GgufValue::F32(1.5f));
  w.Set("a.f64", GgufValue::F64(-2.25));
  w.Set("a.bool", GgufValue::Bool(true));
  w.Set("a.str", GgufValue::String("héllo"));
  w.Set("a.arr_i32", GgufValue::ArrayOf<int32_t>(GgufType::kI32, {1, -2, 3}));
  w.Set("a.arr_str", GgufValue::StringArray({"x", "", "zz"}));
  w.Set("a.nested", GgufValue::ArrayArray({GgufValue::ArrayOf<uint8_t>(GgufType::kU8, {1, 2}),
                                           GgufValue::StringArray({"q"})}));
  std::vector<float> t0(256 * 3);
  for (size_t i = 0; i < t0.size(); ++i) t0[i] = static_cast<float>(i) * 0.5f;
  ASSERT_TRUE(w.AddTensor("t0", TypeId::kF32, {256, 3}, t0.data(), t0.size() * 4).ok());
  std::vector<uint8_t> t1(66 * 2, 0x55);
  ASSERT_TRUE(w.AddTensor("t1", TypeId::kTQ2_0, {512}, t1.data(), t1.size()).ok());
  const std::string path = TempPath("roundtrip.gguf");
  ASSERT_TRUE(w.WriteFile(path).ok());

  std::unique_ptr<GgufFile> f;
  Status st = GgufFile::Open(path, &f);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(f->metadata().size(), 16u);
  int64_t i = 0;
  uint64_t u = 0;
  double d = 0;
  ASSERT_TRUE(f->Find("a.u8")->AsInt(&i));
  EXPECT_EQ(i, 200);
  ASSERT_TRUE(f->Find("a.i16")->AsInt(&i));
  EXPECT_EQ(i, -30000);
  ASSERT_TRUE(f->Find("a.u32")->AsInt(&i));
  EXPECT_EQ(i, 4000000000ll);
  ASSERT_TRUE(f->Find("a.u64")->AsUint(&u));
  EXPECT_EQ(u, 18000000000000000000ull);
  ASSERT_TRUE(f->Find("a.i64")->AsInt(&i));
  EXPECT_EQ(i, -9000000000000000000ll);
  ASSERT_TRUE(f->Find("a.f32")->AsDouble(&d));
  EXPECT_EQ(d, 1.5);
  ASSERT_TRUE(f->Find("a.f64")->AsDouble(&d));
  EXPECT_EQ(d, -2.25);
  bool b = false;
  ASSERT_TRUE(f->Find("a.bool")->AsBool(&b));
  EXPECT_TRUE(b);
  EXPECT_EQ(f->Find("a.str")->str(), "héllo");
  const GgufValue* arr = f->Find("a.arr_i32");
  ASSERT_EQ(arr->count(), 3u);
  ASSERT_TRUE(arr->IntAt(1, &i));
  EXPECT_EQ(i, -2);
  EXPECT_EQ(f->Find("a.arr_str")->strings(), (std::vector<std::string>{"x", "", "zz"}));
  const GgufValue* nested = f->Find("a.nested");
  ASSERT_EQ(nested->elem_type(), GgufType::kArray);
  ASSERT_EQ(nested->items().size(), 2u);
  EXPECT_EQ(nested->items()[1].strings()[0], "q");
  // A dropped key is gone; the others are still found where they are (the index is rebuilt).
  f->DropMetadata("a.arr_str");
  f->DropMetadata("no.such.key");
  EXPECT_EQ(f->metadata().size(), 15u);
  EXPECT_EQ(f->Find("a.arr_str"), nullptr);
  ASSERT_NE(f->Find("a.nested"), nullptr);
  EXPECT_EQ(f->Find("a.nested")->items()[1].strings()[0], "q");
  EXPECT_EQ(f->Find("a.str")->str(), "héllo");

  ASSERT_EQ(f->tensors().size(), 2u);
  const GgufTensorInfo* a = f->FindTensor("t0");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->ne[0], 256);
  EXPECT_EQ(a->ne[1], 3);
  EXPECT_EQ(a->file_offset % 32, 0u);
  EXPECT_EQ(std::memcmp(a->data, t0.data(), t0.size() * 4), 0);
  const GgufTensorInfo* c = f->FindTensor("t1");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->type, TypeId::kTQ2_0);
  EXPECT_EQ(c->n_bytes, 132u);
  EXPECT_EQ(c->data[0], 0x55);

  // The writer's buffer form is the same bytes as its file form.
  EXPECT_EQ(w.WriteToBuffer(), testing::ReadFileBytes(path));
}

TEST(GgufRoundTrip, ReadFallbackMatchesMmap) {
  GgufOpenOptions no_mmap;
  no_mmap.use_mmap = false;
  std::unique_ptr<GgufFile> a, b;
  ASSERT_TRUE(GgufFile::Open(ModelPath("stories260K.gguf"), &a).ok());
  ASSERT_TRUE(GgufFile::Open(ModelPath("stories260K.gguf"), no_mmap, &b).ok());
  ASSERT_EQ(a->tensors().size(), b->tensors().size());
  for (size_t i = 0; i < a->tensors().size(); ++i) {
    const auto& ta = a->tensors()[i];
    const auto& tb = b->tensors()[i];
    EXPECT_EQ(ta.name, tb.name);
    ASSERT_EQ(ta.n_bytes, tb.n_bytes);
    EXPECT_EQ(std::memcmp(ta.data, tb.data, ta.n_bytes), 0) << ta.name;
  }
}

TEST(GgufRoundTrip, ShippedFilesRewriteToIdenticalBytes) {
  // Re-emitting a llama.cpp file's metadata and tensors must reproduce it exactly: same key order,
  // value encodings, tensor infos, alignment padding.
  for (const char* name : {"stories260K.gguf", "bitnet-tiny-stories-TQ2_0-f16emb.gguf", "tiny-tern-q4_k_m.gguf"}) {
    SCOPED_TRACE(name);
    std::unique_ptr<GgufFile> f;
    ASSERT_TRUE(GgufFile::Open(ModelPath(name), &f).ok());
    GgufWriter w;
    for (const auto& [k, v] : f->metadata()) w.Set(k, v);
    for (const auto& t : f->tensors()) {
      ASSERT_TRUE(w.AddTensor(t.name, t.type, std::vector<int64_t>(t.ne, t.ne + t.n_dims), t.data, t.n_bytes,
                              /*copy=*/false)
                      .ok());
    }
    EXPECT_TRUE(w.WriteToBuffer() == testing::ReadFileBytes(ModelPath(name)));
  }
}

TEST(GgufSplit, TwoPartsReadAsOneModel) {
  GgufWriter w1, w2;
  w1.Set("general.architecture", GgufValue::String("llama"));
  w1.Set("split.no", GgufValue::U16(0));
  w1.Set("split.count", GgufValue::U16(2));
  w2.Set("split.no", GgufValue::U16(1));
  w2.Set("split.count", GgufValue::U16(2));
  std::vector<float> a(32, 1.0f), b(64, 2.0f);
  ASSERT_TRUE(w1.AddTensor("a", TypeId::kF32, {32}, a.data(), a.size() * 4).ok());
  ASSERT_TRUE(w2.AddTensor("b", TypeId::kF32, {64}, b.data(), b.size() * 4).ok());
  const std::string p1 = TempPath("m-00001-of-00002.gguf");
  ASSERT_TRUE(w1.WriteFile(p1).ok());
  ASSERT_TRUE(w2.WriteFile(TempPath("m-00002-of-00002.gguf")).ok());
  std::unique_ptr<GgufFile> f;
  Status st = GgufFile::Open(p1, &f);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(f->n_splits(), 2);
  ASSERT_NE(f->FindTensor("b"), nullptr);
  EXPECT_EQ(f->FindTensor("b")->split, 1);
  float v;
  std::memcpy(&v, f->FindTensor("b")->data, 4);
  EXPECT_EQ(v, 2.0f);
}

}  // namespace
}  // namespace trine
