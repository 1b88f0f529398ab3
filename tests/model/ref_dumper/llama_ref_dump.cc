// Reference dumper over llama.cpp's public C API (llama.h): writes the parity reference JSON that
// tests/model/llama1b_shape_parity_test.cc reads, and optionally every intermediate F32 tensor of one
// prompt's evaluation (for locating where two runtimes first depart). Not built by trine's build:
// it links against a llama.cpp build. See tests/model/ref_dumper/README.md for the commands.
//
// Usage: llama_ref_dump MODEL.gguf OUT.json [--top-k K] [--dump-dir DIR --dump-prompt I]
//                      [--threads T] [--perturb NAME] [prompt ...]
// Settings follow models/ref/README.md: BOS added (add_special), the whole prompt as one batch,
// n_ctx 256, n_batch = n_ubatch = 256, KV F16, flash attention auto, 2 threads (--threads T);
// greedy (lowest id on ties) for 32 tokens, each decoded alone.
#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "ggml-backend.h"
#include "ggml.h"
#include "llama.h"

namespace {

struct DumpState {
  std::string perturb;  // --perturb NAME: every tensor of that name, even elements moved up 1 ulp
  bool on = false;
  std::string dir;
  FILE* index = nullptr;
  int seq = 0;
};

// Every F32 tensor of the graph, as raw little-endian floats DIR/NNN_name.bin, listed with its
// shape in DIR/index.txt ("NNN name ne0 ne1 ne2 ne3").
// With --perturb NAME, every F32 tensor named NAME has its even-indexed elements moved up by one
// ulp (nextafterf) before the rest of the graph reads it: an ulp-level change of the kind a
// different summation order makes, to measure how far llama.cpp's own logits move under it.
void Perturb(ggml_tensor* t) {
  std::vector<float> buf(static_cast<size_t>(ggml_nelements(t)));
  ggml_backend_tensor_get(t, buf.data(), 0, buf.size() * sizeof(float));
  for (size_t i = 0; i < buf.size(); i += 2) buf[i] = std::nextafter(buf[i], INFINITY);
  ggml_backend_tensor_set(t, buf.data(), 0, buf.size() * sizeof(float));
}

bool EvalCallback(ggml_tensor* t, bool ask, void* user) {
  DumpState* s = static_cast<DumpState*>(user);
  const bool perturb = !s->perturb.empty() && s->perturb == t->name && t->type == GGML_TYPE_F32 &&
                       ggml_is_contiguous(t);
  if (ask) return perturb || (s->on && t->type == GGML_TYPE_F32);
  if (perturb) Perturb(t);
  if (!s->on || t->type != GGML_TYPE_F32) return true;
  const int64_t n = ggml_nelements(t);
  std::vector<float> buf(static_cast<size_t>(n));
  if (ggml_is_contiguous(t)) {
    ggml_backend_tensor_get(t, buf.data(), 0, static_cast<size_t>(n) * sizeof(float));
  } else {
    // Views (e.g. per-head slices): gather element by element from the whole tensor's bytes.
    std::vector<uint8_t> raw(ggml_nbytes(t));
    ggml_backend_tensor_get(t, raw.data(), 0, raw.size());
    size_t k = 0;
    for (int64_t i3 = 0; i3 < t->ne[3]; ++i3)
      for (int64_t i2 = 0; i2 < t->ne[2]; ++i2)
        for (int64_t i1 = 0; i1 < t->ne[1]; ++i1)
          for (int64_t i0 = 0; i0 < t->ne[0]; ++i0) {
            std::memcpy(&buf[k++], raw.data() + i0 * t->nb[0] + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3], 4);
          }
  }
  char path[4096];
  std::string name = t->name;
  for (char& c : name) {
    if (c == '/' || c == ' ') c = '_';
  }
  std::snprintf(path, sizeof(path), "%s/%04d_%s.bin", s->dir.c_str(), s->seq, name.c_str());
  FILE* f = std::fopen(path, "wb");
  if (f != nullptr) {
    std::fwrite(buf.data(), sizeof(float), buf.size(), f);
    std::fclose(f);
  }
  std::fprintf(s->index, "%04d %s %" PRId64 " %" PRId64 " %" PRId64 " %" PRId64 "\n", s->seq, name.c_str(), t->ne[0],
               t->ne[1], t->ne[2], t->ne[3]);
  ++s->seq;
  return true;
}

// Length of the well-formed UTF-8 sequence at s[i] (0: ill-formed, e.g. a token piece that ends
// inside a character).
size_t Utf8Len(const std::string& s, size_t i) {
  const unsigned char c = static_cast<unsigned char>(s[i]);
  size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
  if (n == 0 || i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((static_cast<unsigned char>(s[i + k]) >> 6) != 2) return 0;
  }
  return n;
}

// A JSON string; bytes that are not well-formed UTF-8 become U+FFFD (the JSON must stay valid).
std::string JsonString(const std::string& raw) {
  std::string s;
  for (size_t i = 0; i < raw.size();) {
    const size_t n = Utf8Len(raw, i);
    if (n == 0) {
      s += "\xEF\xBF\xBD";
      ++i;
    } else {
      s.append(raw, i, n);
      i += n;
    }
  }
  std::string o = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      o += '\\';
      o += static_cast<char>(c);
    } else if (c < 0x20) {
      char b[8];
      std::snprintf(b, sizeof(b), "\\u%04x", c);
      o += b;
    } else {
      o += static_cast<char>(c);
    }
  }
  return o + "\"";
}

// Ids sorted by logit descending, lower id first on ties.
std::vector<int> TopK(const float* l, int n, int k) {
  std::vector<int> ids(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) ids[static_cast<size_t>(i)] = i;
  k = std::min(k, n);
  std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), [&](int a, int b) {
    return l[a] > l[b] || (l[a] == l[b] && a < b);
  });
  ids.resize(static_cast<size_t>(k));
  return ids;
}

// FNV-1a 64 of the model file's bytes: the test checks that the file it made with trine mkmodel
// is the one this reference was computed from.
std::string FileFnv1a64(const char* path) {
  FILE* f = std::fopen(path, "rb");
  if (f == nullptr) return "";
  uint64_t h = 1469598103934665603ull;
  std::vector<unsigned char> buf(1 << 20);
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), f)) > 0) {
    for (size_t i = 0; i < n; ++i) h = (h ^ buf[i]) * 1099511628211ull;
  }
  std::fclose(f);
  char out[32];
  std::snprintf(out, sizeof(out), "%016" PRIx64, h);
  return out;
}

std::string Piece(const llama_vocab* vocab, int tok) {
  char buf[256];
  const int n = llama_token_to_piece(vocab, tok, buf, sizeof(buf), 0, false);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s MODEL.gguf OUT.json [--top-k K] [--dump-dir DIR --dump-prompt I] "
                         "[--threads T] [--perturb NAME] [prompt ...]\n", argv[0]);
    return 2;
  }
  const char* model_path = argv[1];
  const char* out_path = argv[2];
  int top_k = 64, dump_prompt = -1, n_threads = 2;
  const int n_batch = 256;
  std::string dump_dir, perturb;
  std::vector<std::string> prompts;
  for (int i = 3; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--top-k" && i + 1 < argc) {
      top_k = std::atoi(argv[++i]);
    } else if (a == "--dump-dir" && i + 1 < argc) {
      dump_dir = argv[++i];
    } else if (a == "--dump-prompt" && i + 1 < argc) {
      dump_prompt = std::atoi(argv[++i]);
    } else if (a == "--perturb" && i + 1 < argc) {
      perturb = argv[++i];
    } else if (a == "--threads" && i + 1 < argc) {
      n_threads = std::atoi(argv[++i]);
    } else {
      prompts.push_back(a);
    }
  }
  if (prompts.empty()) prompts = {"Once upon a time", "The capital of France is", "1 2 3 4"};

  llama_backend_init();
  llama_model_params mp = llama_model_default_params();
  llama_model* model = llama_model_load_from_file(model_path, mp);
  if (model == nullptr) {
    std::fprintf(stderr, "cannot load %s\n", model_path);
    return 1;
  }
  const llama_vocab* vocab = llama_model_get_vocab(model);
  const int n_vocab = llama_vocab_n_tokens(vocab);

  DumpState dump;
  dump.perturb = perturb;
  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = 256;
  cp.n_batch = static_cast<uint32_t>(n_batch);
  cp.n_ubatch = static_cast<uint32_t>(n_batch);
  cp.n_threads = n_threads;
  cp.n_threads_batch = n_threads;
  cp.type_k = GGML_TYPE_F16;
  cp.type_v = GGML_TYPE_F16;
  cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_AUTO;
  if (!dump_dir.empty() || !perturb.empty()) {
    cp.cb_eval = EvalCallback;
    cp.cb_eval_user_data = &dump;
  }
  llama_context* ctx = llama_init_from_model(model, cp);
  if (ctx == nullptr) {
    std::fprintf(stderr, "cannot create a context\n");
    return 1;
  }

  FILE* out = std::fopen(out_path, "w");
  if (out == nullptr) return 1;
  std::string base = model_path;
  base = base.substr(base.find_last_of('/') == std::string::npos ? 0 : base.find_last_of('/') + 1);
  std::fprintf(out, "{\n\"model_file\": %s,\n\"model_fnv1a64\": \"%s\",\n\"n_vocab\": %d,\n",
               JsonString(base).c_str(), FileFnv1a64(model_path).c_str(), n_vocab);
  std::fprintf(out,
               "\"settings\": {\"n_ctx\": 256, \"n_batch\": %d, \"n_ubatch\": %d, \"n_threads\": %d, "
               "\"flash_attn_type\": \"auto\", \"type_k\": \"f16\", \"type_v\": \"f16\", \"add_special\": true, "
               "\"parse_special\": false, \"prompt_decoded_as_one_batch\": true, "
               "\"sampling\": \"greedy argmax, lowest id on ties\"},\n\"prompts\": [\n",
               n_batch, n_batch, n_threads);
  for (size_t pi = 0; pi < prompts.size(); ++pi) {
    llama_memory_clear(llama_get_memory(ctx), true);
    const std::string& text = prompts[pi];
    std::vector<llama_token> toks(text.size() + 8);
    const int nt = llama_tokenize(vocab, text.c_str(), static_cast<int32_t>(text.size()), toks.data(),
                                  static_cast<int32_t>(toks.size()), true, false);
    if (nt < 0) return 1;
    toks.resize(static_cast<size_t>(nt));
    if (static_cast<int>(pi) == dump_prompt) {
      dump.on = true;
      dump.dir = dump_dir;
      dump.index = std::fopen((dump_dir + "/index.txt").c_str(), "w");
    }
    if (llama_decode(ctx, llama_batch_get_one(toks.data(), nt)) != 0) return 1;
    if (dump.on) {
      dump.on = false;
      std::fclose(dump.index);
    }
    const float* l = llama_get_logits_ith(ctx, -1);
    std::fprintf(out, "%s{\"prompt\": %s,\n\"prompt_tokens\": [", pi ? ",\n" : "", JsonString(text).c_str());
    for (int i = 0; i < nt; ++i) std::fprintf(out, "%s%d", i ? ", " : "", toks[static_cast<size_t>(i)]);
    std::fprintf(out, "],\n\"last_logits_top%d\": [", top_k);
    const std::vector<int> top = TopK(l, n_vocab, top_k);
    for (size_t i = 0; i < top.size(); ++i) std::fprintf(out, "%s[%d, %.9g]", i ? ", " : "", top[i], l[top[i]]);
    std::fprintf(out, "],\n");
    std::vector<int> g_tok, g_run;
    std::vector<float> g_top, g_margin;
    std::string g_text;
    for (int step = 0; step < 32; ++step) {
      const float* lg = llama_get_logits_ith(ctx, -1);
      const std::vector<int> t2 = TopK(lg, n_vocab, 2);
      g_tok.push_back(t2[0]);
      g_run.push_back(t2[1]);
      g_top.push_back(lg[t2[0]]);
      g_margin.push_back(lg[t2[0]] - lg[t2[1]]);
      g_text += Piece(vocab, t2[0]);
      llama_token t = t2[0];
      if (llama_decode(ctx, llama_batch_get_one(&t, 1)) != 0) return 1;
    }
    std::fprintf(out, "\"greedy_tokens\": [");
    for (size_t i = 0; i < g_tok.size(); ++i) std::fprintf(out, "%s%d", i ? ", " : "", g_tok[i]);
    std::fprintf(out, "],\n\"greedy_text\": %s,\n\"greedy_top1_logit\": [", JsonString(g_text).c_str());
    for (size_t i = 0; i < g_top.size(); ++i) std::fprintf(out, "%s%.9g", i ? ", " : "", g_top[i]);
    std::fprintf(out, "],\n\"greedy_runner_up\": [");
    for (size_t i = 0; i < g_run.size(); ++i) std::fprintf(out, "%s%d", i ? ", " : "", g_run[i]);
    std::fprintf(out, "],\n\"greedy_margin\": [");
    for (size_t i = 0; i < g_margin.size(); ++i) std::fprintf(out, "%s%.6g", i ? ", " : "", g_margin[i]);
    std::fprintf(out, "]}");
  }
  std::fprintf(out, "\n]\n}\n");
  std::fclose(out);
  llama_free(ctx);
  llama_model_free(model);
  llama_backend_free();
  return 0;
}
