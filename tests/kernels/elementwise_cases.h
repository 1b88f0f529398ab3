// The bit comparison of the vector element-wise kernels (ElementwiseKernels, kernels.h) against
// their scalar forms (kernels/ref/elementwise_ref.h), shared by the GoogleTest suite
// (elementwise_test.cc) and the NEON qemu check (tests/neon). No GoogleTest here.
//
// Inputs: normal values of several scales, and edge values (signed zeros, subnormals, values whose
// squares or exponentials overflow, inf, NaN); lengths around each vector width and the model
// row sizes (2048, 2560, 6912). Every output must equal the scalar form's bits (a NaN must be a
// NaN), and nothing past n may be written.
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
#include "ref/elementwise_ref.h"

namespace trine::kernels {

inline bool SameBits(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return std::memcmp(&a, &b, 4) == 0;
}

// Empty when the outputs agree, else the first difference.
inline std::string CompareRows(const char* what, const std::vector<float>& want, const std::vector<float>& got,
                               int64_t n) {
  for (int64_t i = 0; i < static_cast<int64_t>(want.size()); ++i) {
    const size_t k = static_cast<size_t>(i);
    if (i >= n) {
      if (!std::isnan(got[k])) return std::string(what) + ": wrote past n at " + std::to_string(i);
      continue;
    }
    if (!SameBits(want[k], got[k])) {
      char buf[160];
      std::snprintf(buf, sizeof buf, "%s: n %lld index %lld want %a got %a", what, static_cast<long long>(n),
                    static_cast<long long>(i), static_cast<double>(want[k]), static_cast<double>(got[k]));
      return buf;
    }
  }
  return "";
}

inline std::vector<float> ElementwiseInput(int64_t n, float scale, bool edges, std::mt19937* rng) {
  std::normal_distribution<float> nd(0.0f, scale);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = nd(*rng);
  if (edges) {
    const float inf = std::numeric_limits<float>::infinity();
    const float edge[] = {0.0f,  -0.0f, 87.0f,   -87.0f, 88.8f, -88.8f, 103.0f, -103.0f, 133.0f, -133.0f,
                          200.0f, -200.0f, 1e30f, -1e30f, inf,   -inf,   std::numeric_limits<float>::quiet_NaN(),
                          1e-30f, -1e-30f, 0.5f,   -0.5f,  1e-40f, -1e-40f, 3e19f, -2e20f};
    std::uniform_int_distribution<int64_t> at(0, n - 1);
    for (float e : edge) v[static_cast<size_t>(at(*rng))] = e;
    // A run that walks ExpfPoly's results through the subnormal range.
    for (int64_t i = 0; i < 64 && i < n; ++i) v[static_cast<size_t>((i * 7) % n)] = -80.0f - 0.37f * static_cast<float>(i);
  }
  return v;
}

// Every non-null member of `k` against its scalar form; returns the failures (empty: all agree)
// and counts the rows checked in *checked.
inline std::vector<std::string> CheckElementwise(const ElementwiseKernels& k, int* checked) {
  std::vector<std::string> fails;
  std::mt19937 rng(11);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const int64_t lens[] = {1, 3, 4, 7, 8, 9, 15, 16, 17, 31, 32, 33, 48, 63, 64, 65, 100, 2048, 2560, 6912};
  auto note = [&](const std::string& err) {
    if (!err.empty() && fails.size() < 20) fails.push_back(err);
  };
  for (int64_t n : lens) {
    for (int variant = 0; variant < 4; ++variant) {
      const bool edges = variant >= 2;
      const float scale = variant % 2 == 0 ? 4.0f : 0.05f;
      const std::vector<float> a = ElementwiseInput(n, scale, edges, &rng);
      const std::vector<float> b = ElementwiseInput(n, 1.0f, false, &rng);
      std::vector<float> want(static_cast<size_t>(n + 16), nan), got(static_cast<size_t>(n + 16), nan);
      if (k.swiglu != nullptr && n % 16 == 0) {
        SwiGluVecRef(a.data(), b.data(), want.data(), n);
        k.swiglu(a.data(), b.data(), got.data(), n);
        note(CompareRows("swiglu", want, got, n));
        ++*checked;
      }
      if (k.relu_sqr_glu != nullptr) {
        std::fill(got.begin(), got.end(), nan);
        ReluSqrGluRef(a.data(), b.data(), want.data(), n);
        k.relu_sqr_glu(a.data(), b.data(), got.data(), n);
        note(CompareRows("relu_sqr_glu", want, got, n));
        ++*checked;
      }
      if (k.rms_scale != nullptr) {
        for (float eps : {1e-5f, 1e-6f, 0.0f}) {
          const float w = RmsScaleRef(a.data(), n, eps), g = k.rms_scale(a.data(), n, eps);
          if (!SameBits(w, g)) {
            char buf[160];
            std::snprintf(buf, sizeof buf, "rms_scale: n %lld eps %g want %a got %a", static_cast<long long>(n),
                          static_cast<double>(eps), static_cast<double>(w), static_cast<double>(g));
            note(buf);
          }
        }
        ++*checked;
      }
      if (k.scale_mul != nullptr) {
        std::fill(got.begin(), got.end(), nan);
        const float s = RmsScaleRef(a.data(), n, 1e-5f);
        ScaleMulRef(a.data(), s, b.data(), want.data(), n);
        k.scale_mul(a.data(), s, b.data(), got.data(), n);
        note(CompareRows("scale_mul", want, got, n));
        ++*checked;
      }
    }
  }
  // RoPE: heads of 64 and 128 values fully rotated, partial rotations (n_rot < head_dim), odd halves.
  struct RopeShape {
    int n_heads, head_dim, half;
  };
  const RopeShape shapes[] = {{32, 64, 32}, {8, 64, 32}, {20, 128, 64}, {5, 128, 64}, {3, 80, 40},
                              {4, 96, 24},  {2, 10, 5},  {3, 6, 3},     {1, 2, 1},    {2, 256, 100}};
  for (const RopeShape& s : shapes) {
    for (int edges = 0; edges < 2; ++edges) {
      const int64_t n = static_cast<int64_t>(s.n_heads) * s.head_dim;
      std::vector<float> x0 = ElementwiseInput(n, 2.0f, edges != 0, &rng);
      std::vector<float> cs(static_cast<size_t>(s.half)), sn(static_cast<size_t>(s.half));
      std::vector<float> m1(2 * cs.size()), m2(2 * cs.size());
      std::uniform_real_distribution<float> ang(-100.0f, 100.0f);
      for (size_t i = 0; i < cs.size(); ++i) {
        const float t = ang(rng);
        cs[i] = std::cos(t), sn[i] = std::sin(t);
      }
      if (edges != 0) {
        // Signed zeros in the factors and the values: -(b * sn) must be a negation (a -0 where
        // b * sn is +0), not 0 - b * sn.
        for (size_t i = 0; i < cs.size(); i += 3) cs[i] = i % 2 == 0 ? 0.0f : -0.0f;
        for (size_t i = 1; i < sn.size(); i += 3) sn[i] = i % 2 == 0 ? -0.0f : 0.0f;
        for (size_t i = 0; i < x0.size(); i += 5) x0[i] = i % 2 == 0 ? -0.0f : 0.0f;
      }
      for (size_t i = 0; i < cs.size(); ++i) {
        m1[2 * i] = cs[i], m1[2 * i + 1] = sn[i];
        m2[2 * i] = sn[i], m2[2 * i + 1] = cs[i];
      }
      for (bool neox : {false, true}) {
        std::vector<float> want = x0, got = x0;
        want.resize(static_cast<size_t>(n + 16), nan);
        got.resize(static_cast<size_t>(n + 16), nan);
        RotatePairsRef(want.data(), s.n_heads, s.head_dim, s.half, neox, cs.data(), sn.data());
        if (neox && k.rope_neox != nullptr) {
          k.rope_neox(got.data(), s.n_heads, s.head_dim, s.half, cs.data(), sn.data());
        } else if (!neox && k.rope_pairs != nullptr) {
          k.rope_pairs(got.data(), s.n_heads, s.head_dim, s.half, m1.data(), m2.data());
        } else {
          continue;
        }
        note(CompareRows(neox ? "rope_neox" : "rope_pairs", want, got, n));
        ++*checked;
      }
    }
  }
  return fails;
}

}  // namespace trine::kernels
