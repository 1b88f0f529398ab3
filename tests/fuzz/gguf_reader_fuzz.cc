// libFuzzer target for the GGUF reader and the model/tokenizer validation behind `trine inspect`.
// Each input is written to a per-process file and opened with the read() path (so tensor data sits
// on the ASan-checked heap), then every accessor a loader would use is exercised: metadata display,
// tensor shapes, the first and last byte of every tensor, LoadModelConfig and LoadVocab.
// Invariants checked: a failure has a message naming the file; a success has in-bounds tensors.
#include <memory>
#include <string>

#include "fuzz_util.h"
#include "gguf/gguf_reader.h"
#include "model/model_config.h"
#include "tokenizer/vocab.h"

// Keeps the reads of tensor bytes and strings from being optimised away.
volatile size_t g_fuzz_sink = 0;

using trine::fuzz::Check;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = trine::fuzz::ScratchPath(".gguf");
  if (!trine::fuzz::WriteFile(path, data, size)) return 0;

  trine::GgufOpenOptions opts;
  opts.use_mmap = false;
  std::unique_ptr<trine::GgufFile> g;
  const trine::Status st = trine::GgufFile::Open(path, opts, &g);
  if (!st.ok()) {
    Check(g == nullptr, "failed Open set its output");
    Check(st.message().find(path) != std::string::npos, "error message does not name the file");
    return 0;
  }
  size_t sink = 0;
  for (const auto& [key, value] : g->metadata()) sink += key.size() + value.ToDisplayString().size();
  for (const auto& t : g->tensors()) {
    Check(t.n_bytes > 0 && t.file_offset + t.n_bytes <= g->file_size(), "tensor outside the file");
    Check(t.file_offset % g->alignment() == 0, "tensor data misaligned");
    sink += t.ShapeString().size() + t.data[0] + t.data[t.n_bytes - 1];
  }
  trine::ModelConfig cfg;
  if (trine::LoadModelConfig(*g, &cfg).ok()) {
    Check(cfg.n_embd > 0 && cfg.n_head > 0 && cfg.n_embd % cfg.n_head == 0, "inconsistent config accepted");
  }
  trine::Vocab vocab;
  if (trine::LoadVocab(*g, &vocab).ok()) {
    Check(vocab.size() > 0, "empty vocabulary accepted");
    Check(vocab.bos() < vocab.size() && vocab.eos() < vocab.size(), "special token out of range");
  }
  g_fuzz_sink = sink;
  return 0;
}
