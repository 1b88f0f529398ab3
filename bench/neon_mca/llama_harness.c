/* Calls llama.cpp's ggml_vec_dot_tq2_0_q8_K (compiled by bench/neon_mca.sh from a llama.cpp
 * checkout, LLAMA_CPP=/path; nothing of llama.cpp is kept here) once on one synthetic row of 8
 * TQ2_0 blocks, like trine_harness.cc, so that the same qemu trace + llvm-mca pipeline times its
 * block loop. The structs are the GGUF block layouts (TQ2_0: 64 code bytes + fp16 d; Q8_K: fp32 d,
 * 256 int8, 16 int16 block sums). */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

typedef struct { uint8_t qs[64]; uint16_t d; } tq2_block;
typedef struct { float d; int8_t qs[256]; int16_t bsums[16]; } q8k_block;

void ggml_vec_dot_tq2_0_q8_K(int n, float* s, size_t bs, const void* vx, size_t bx, const void* vy, size_t by,
                             int nrc);

enum { kBlocks = 8 };

int main(void) {
  static tq2_block x[kBlocks];
  static q8k_block y[kBlocks];
  uint32_t seed = 12345;
  uint8_t* p = (uint8_t*)x;
  for (size_t i = 0; i < sizeof(x); ++i) p[i] = (uint8_t)((seed = seed * 1664525u + 1013904223u) >> 8);
  p = (uint8_t*)y;
  for (size_t i = 0; i < sizeof(y); ++i) p[i] = (uint8_t)((seed = seed * 1664525u + 1013904223u) >> 8);
  for (int b = 0; b < kBlocks; ++b) {
    x[b].d = 0x2E66;
    y[b].d = 0.01f;
  }
  float s = 0.0f;
  ggml_vec_dot_tq2_0_q8_K(256 * kBlocks, &s, 0, x, 0, y, 0, 1);
  printf("%g\n", (double)s);
  return 0;
}
