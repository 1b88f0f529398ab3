// Inputs and the byte comparison for the activation-quantizer conformance checks: the GoogleTest
// suite (quantize_act_conformance_test.cc) and the NEON qemu check (tests/neon) use the same ones.
// No GoogleTest here (the NEON check builds without it).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels.h"
#include "tensor/blocks.h"
#include "tensor/quantize_ref.h"

namespace trine::kernels {

struct QuantActKind {
  const char* name;
  int64_t block;       // elements per block (ranges are split on these)
  size_t block_bytes;  // bytes per block
  QuantizeActFn ref;
  QuantizeActFn KernelTable::*entry;
};

inline std::vector<QuantActKind> QuantActKinds() {
  return {{"q8_K", kQK_K, sizeof(BlockQ8_K), QuantizeRowQ8_K, &KernelTable::quantize_q8_K},
          {"q8_0", kQK8_0, sizeof(BlockQ8_0), QuantizeRowQ8_0Act, &KernelTable::quantize_q8_0},
          {"f16", 1, 2, QuantizeRowF16, &KernelTable::quantize_f16},
          // Not an activation format: the Q4_0 weight quantizer of head requantization.
          {"q4_0", kQK4_0, sizeof(BlockQ4_0), QuantizeRowQ4_0, &KernelTable::quantize_q4_0}};
}

inline float FloatFromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// A quiet NaN with this sign and payload (bits 0..21).
inline float QuietNan(bool negative, uint32_t payload) {
  return FloatFromBits((negative ? 0x80000000u : 0u) | 0x7FC00000u | (payload & 0x3FFFFFu));
}

struct QuantActInput {
  std::string name;
  std::vector<float> x;
};

// Edge patterns, one per chunk of `chunk` elements (a whole Q8_K block; the Q8_0 blocks inside
// see the same patterns at their own scale): pattern p of kEdgePatterns.
constexpr int kEdgePatterns = 20;
inline void FillEdgeChunk(int p, float* x, int64_t chunk, std::mt19937* rng) {
  std::normal_distribution<float> nd(0.0f, 1.0f);
  auto pos = [&] { return static_cast<int64_t>((*rng)() % static_cast<uint32_t>(chunk)); };
  const float denorm_min = std::numeric_limits<float>::denorm_min();
  const float inf = std::numeric_limits<float>::infinity();
  for (int64_t j = 0; j < chunk; ++j) x[j] = nd(*rng);
  switch (p) {
    case 0:  // all zero
      for (int64_t j = 0; j < chunk; ++j) x[j] = 0.0f;
      break;
    case 1:  // all zero, mixed signs
      for (int64_t j = 0; j < chunk; ++j) x[j] = (j % 3 == 0) ? -0.0f : 0.0f;
      break;
    case 2:
    case 3: {  // the largest |x| twice, opposite signs: the first one's sign wins (Q8_K)
      for (int64_t j = 0; j < chunk; ++j) x[j] = std::fmod(x[j], 3.0f);
      for (int64_t base = 0; base < chunk; base += 32) {
        const int64_t a = base + static_cast<int64_t>((*rng)() % 16), b = a + 1 + static_cast<int64_t>((*rng)() % 15);
        x[a] = p == 2 ? -5.0f : 5.0f;
        x[b] = -x[a];
      }
      break;
    }
    case 4:  // denormals and zeros
      for (int64_t j = 0; j < chunk; ++j) x[j] = ((*rng)() % 4 == 0) ? 0.0f : FloatFromBits((*rng)() & 0x807FFFFFu);
      break;
    case 5:  // one tiny denormal, the rest zero: -127 / max overflows to inf
      for (int64_t j = 0; j < chunk; ++j) x[j] = 0.0f;
      x[pos()] = ((*rng)() % 2 ? -1.0f : 1.0f) * denorm_min * static_cast<float>(1 + (*rng)() % 5);
      break;
    case 6:  // small normals around the overflow of 127 / max, with denormals
      for (int64_t j = 0; j < chunk; ++j) {
        x[j] = ((*rng)() % 2 ? denorm_min * 3.0f : 1e-38f) * nd(*rng);
      }
      x[pos()] = 3e-37f;
      break;
    case 7:  // huge values
      for (int64_t j = 0; j < chunk; ++j) x[j] = nd(*rng) * 1e38f;
      x[pos()] = -std::numeric_limits<float>::max();
      break;
    case 8:  // +inf
      x[pos()] = inf;
      break;
    case 9:  // -inf and +inf
      x[pos()] = -inf;
      x[pos()] = inf;
      break;
    case 10:  // the default quiet NaN at a few positions
      for (int k = 0; k < 5; ++k) x[pos()] = std::numeric_limits<float>::quiet_NaN();
      break;
    case 11:  // quiet NaNs with payloads and both signs
      for (int k = 0; k < 9; ++k) x[pos()] = QuietNan((*rng)() % 2, (*rng)());
      break;
    case 12:  // all NaN
      for (int64_t j = 0; j < chunk; ++j) x[j] = QuietNan((*rng)() % 2, (*rng)() % 4 == 0 ? 0u : (*rng)());
      break;
    case 13:  // NaN and inf together
      for (int k = 0; k < 4; ++k) x[pos()] = QuietNan((*rng)() % 2, (*rng)());
      x[pos()] = (*rng)() % 2 ? inf : -inf;
      break;
    case 14:  // NaN first, the maximum later; NaN where the maximum would be
      x[0] = QuietNan(false, 77);
      x[chunk - 1] = -40.0f;
      x[chunk / 2] = QuietNan(true, 1234567);
      break;
    case 15: {  // exact halves after scaling (round half to even): max 127, the rest k + 0.5
      for (int64_t j = 0; j < chunk; ++j) x[j] = static_cast<float>(static_cast<int>((*rng)() % 253) - 126) + 0.5f;
      for (int64_t base = 0; base < chunk; base += 32) x[base + static_cast<int64_t>((*rng)() % 32)] = -127.0f;
      break;
    }
    case 16:  // wide dynamic range
      for (int64_t j = 0; j < chunk; ++j) {
        x[j] = std::ldexp(nd(*rng), static_cast<int>((*rng)() % 260) - 140);
      }
      break;
    case 17:  // equal magnitudes, random signs: ties everywhere
      for (int64_t j = 0; j < chunk; ++j) x[j] = (*rng)() % 2 ? 0.75f : -0.75f;
      break;
    case 18:  // random bit patterns (NaNs made quiet, keeping their payloads)
      for (int64_t j = 0; j < chunk; ++j) {
        uint32_t u = (*rng)();
        if ((u & 0x7F800000u) == 0x7F800000u && (u & 0x7FFFFFu) != 0) u |= 0x400000u;
        x[j] = FloatFromBits(u);
      }
      break;
    case 19:  // one nonzero value (scaling by exactly -127 / x)
      for (int64_t j = 0; j < chunk; ++j) x[j] = 0.0f;
      x[pos()] = nd(*rng);
      break;
    default:
      break;
  }
}

// Rows to check: random normal rows of several lengths and scales, and edge rows (every pattern
// at every chunk offset of a 2560-long row, in a few orders).
inline std::vector<QuantActInput> QuantActInputs() {
  std::vector<QuantActInput> out;
  std::mt19937 rng(2024);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (int64_t n : {int64_t{32}, int64_t{256}, int64_t{2560}, int64_t{2567}, int64_t{6912}}) {
    for (float scale : {1.0f, 1e-3f, 37.0f, 1e30f}) {
      char name[64];
      std::snprintf(name, sizeof(name), "normal n=%lld scale=%g", static_cast<long long>(n), static_cast<double>(scale));
      QuantActInput in{name, std::vector<float>(static_cast<size_t>(n))};
      for (auto& v : in.x) v = nd(rng) * scale;
      out.push_back(std::move(in));
    }
  }
  for (int rep = 0; rep < 4; ++rep) {
    QuantActInput in{"edge patterns, order " + std::to_string(rep), std::vector<float>(static_cast<size_t>(kEdgePatterns) * 256)};
    for (int c = 0; c < kEdgePatterns; ++c) FillEdgeChunk((c + 7 * rep) % kEdgePatterns, in.x.data() + c * 256, 256, &rng);
    out.push_back(std::move(in));
  }
  for (int p = 0; p < kEdgePatterns; ++p) {  // each pattern alone, over a whole 6912-long row
    QuantActInput in{"edge pattern " + std::to_string(p) + " n=6912", std::vector<float>(6912)};
    for (int c = 0; c < 6912 / 256; ++c) FillEdgeChunk(p, in.x.data() + c * 256, 256, &rng);
    out.push_back(std::move(in));
  }
  {  // a sweep over all float bit patterns (stride 4097), NaNs quiet
    QuantActInput in{"bit-pattern sweep", std::vector<float>(1048576)};
    for (size_t j = 0; j < in.x.size(); ++j) {
      uint32_t u = static_cast<uint32_t>(j * 4097u + 12345u);
      if ((u & 0x7F800000u) == 0x7F800000u && (u & 0x7FFFFFu) != 0) u |= 0x400000u;
      in.x[j] = FloatFromBits(u);
    }
    out.push_back(std::move(in));
  }
  return out;
}

// "" when fn writes exactly ref's bytes for x (whole row, then block sub-ranges as MatMulShared's
// threads quantize them), else what differed. Output buffers are poisoned with 0xA5 first and
// checked to be written in full.
inline std::string CompareQuantizer(const QuantActKind& k, QuantizeActFn fn, const std::vector<float>& x) {
  const int64_t n = static_cast<int64_t>(x.size());
  const int64_t nb = n / k.block;
  const size_t bytes = static_cast<size_t>(nb) * k.block_bytes;
  std::vector<uint8_t> want(bytes + 64, 0xA5), got(bytes + 64, 0xA5);
  k.ref(x.data(), want.data(), n);
  fn(x.data(), got.data(), n);
  auto describe = [&](const std::vector<uint8_t>& g, const std::vector<uint8_t>& r, const std::string& what) {
    for (size_t i = 0; i < r.size(); ++i) {
      if (g[i] != r[i]) {
        char buf[200];
        std::snprintf(buf, sizeof(buf), "%s: byte %zu (block %zu, offset %zu) is 0x%02x, reference 0x%02x",
                      what.c_str(), i, i / k.block_bytes, i % k.block_bytes, g[i], r[i]);
        return std::string(buf);
      }
    }
    return std::string();
  };
  std::string err = describe(got, want, "whole row");
  if (!err.empty()) return err;
  // Sub-ranges [b0, b1) of blocks quantized on their own equal the whole row's bytes.
  const int64_t splits[][2] = {{0, 1}, {1, 2}, {nb / 3, nb / 3 + (nb + 2) / 3}, {nb / 2, nb}, {nb - 1, nb}};
  for (const auto& s : splits) {
    const int64_t b0 = s[0], b1 = s[1];
    if (b0 < 0 || b1 > nb || b0 >= b1) continue;
    const size_t len = static_cast<size_t>(b1 - b0) * k.block_bytes;
    std::vector<uint8_t> part(len + 64, 0xA5);
    fn(x.data() + b0 * k.block, part.data(), (b1 - b0) * k.block);
    std::vector<uint8_t> ref_slice(want.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(b0) * k.block_bytes),
                                   want.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(b0) * k.block_bytes + len));
    for (int pad = 0; pad < 64; ++pad) ref_slice.push_back(0xA5);
    err = describe(part, ref_slice, "blocks " + std::to_string(b0) + ".." + std::to_string(b1) + " alone");
    if (!err.empty()) return err;
  }
  return "";
}

}  // namespace trine::kernels
