// Reference quantizers for the block formats beyond Q8_0/Q4_0, transcribed
// from ggml's scalar algorithms without an importance matrix
// (ggml-quants.c: quantize_row_*_ref, make_qkx2_quants, make_qx_quants,
// make_q3_quants, quantize_row_iq4_nl_impl), so their error matches ggml's.
// Slow on purpose (searches per sub-block); used by `kvedge quantize`,
// `synth` and tests, never while generating.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "simd/float16.h"
#include "simd/weight_quant.h"

namespace kvedge {
namespace {

constexpr float kGroupMaxEps = 1e-15f;

// Round half to even, as ggml's nearest_int (exact for |f| < 2^22; clamped
// beyond, NaN → 0, so hostile values cannot overflow an int).
int NearestInt(float f) {
  if (!(std::fabs(f) <= 4194303.0f)) return std::isnan(f) ? 0 : (f > 0 ? 4194303 : -4194303);
  const float val = f + 12582912.0f;
  int32_t i;
  std::memcpy(&i, &val, sizeof(i));
  return (i & 0x007fffff) - 0x00400000;
}

// Affine quantization of x[n] to [0, nmax] with a weighted search over the
// scale (ggml's make_qkx2_quants): returns the scale, *the_min = −min.
float MakeQkx2Quants(int n, int nmax, const float* x, const float* weights, uint8_t* L, float* the_min, uint8_t* Laux,
                     float rmin, float rdelta, int nstep, bool use_mad) {
  float min = x[0], max = x[0];
  float sum_w = weights[0], sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    if (x[i] < min) min = x[i];
    if (x[i] > max) max = x[i];
    const float w = weights[i];
    sum_w += w;
    sum_x += w * x[i];
  }
  if (min > 0) min = 0;
  if (max == min) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    *the_min = -min;
    return 0.f;
  }
  float iscale = nmax / (max - min);
  float scale = 1 / iscale;
  float best_mad = 0;
  for (int i = 0; i < n; ++i) {
    const int l = NearestInt(iscale * (x[i] - min));
    L[i] = static_cast<uint8_t>(std::max(0, std::min(nmax, l)));
    float diff = scale * L[i] + min - x[i];
    diff = use_mad ? std::fabs(diff) : diff * diff;
    best_mad += weights[i] * diff;
  }
  for (int is = 0; is <= nstep; ++is) {
    iscale = (rmin + rdelta * is + nmax) / (max - min);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      int l = NearestInt(iscale * (x[i] - min));
      l = std::max(0, std::min(nmax, l));
      Laux[i] = static_cast<uint8_t>(l);
      const float w = weights[i];
      sum_l += w * l;
      sum_l2 += w * l * l;
      sum_xl += w * l * x[i];
    }
    const float D = sum_w * sum_l2 - sum_l * sum_l;
    if (D > 0) {
      float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
      float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
      if (this_min > 0) {
        this_min = 0;
        this_scale = sum_xl / sum_l2;
      }
      float mad = 0;
      for (int i = 0; i < n; ++i) {
        float diff = this_scale * Laux[i] + this_min - x[i];
        diff = use_mad ? std::fabs(diff) : diff * diff;
        mad += weights[i] * diff;
      }
      if (mad < best_mad) {
        for (int i = 0; i < n; ++i) L[i] = Laux[i];
        best_mad = mad;
        scale = this_scale;
        min = this_min;
      }
    }
  }
  *the_min = -min;
  return scale;
}

// Symmetric quantization to [−nmax, nmax−1] weighted by x² (ggml's
// make_qx_quants, rmse_type 1): L holds code + nmax; returns the scale.
float MakeQxQuants(int n, int nmax, const float* x, int8_t* L) {
  const float max = LargestMagnitude(x, n);
  if (std::fabs(max) < kGroupMaxEps) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    return 0.f;
  }
  float iscale = -nmax / max;
  float sumlx = 0, suml2 = 0;
  for (int i = 0; i < n; ++i) {
    int l = NearestInt(iscale * x[i]);
    l = std::max(-nmax, std::min(nmax - 1, l));
    L[i] = static_cast<int8_t>(l + nmax);
    const float w = x[i] * x[i];
    sumlx += w * x[i] * l;
    suml2 += w * l * l;
  }
  float scale = suml2 ? sumlx / suml2 : 0.0f;
  float best = scale * sumlx;
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    iscale = -(nmax + 0.1f * is) / max;
    sumlx = suml2 = 0;
    for (int i = 0; i < n; ++i) {
      int l = NearestInt(iscale * x[i]);
      l = std::max(-nmax, std::min(nmax - 1, l));
      const float w = x[i] * x[i];
      sumlx += w * x[i] * l;
      suml2 += w * l * l;
    }
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      for (int i = 0; i < n; ++i) {
        const int l = NearestInt(iscale * x[i]);
        L[i] = static_cast<int8_t>(nmax + std::max(-nmax, std::min(nmax - 1, l)));
      }
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

// ggml's make_q3_quants with do_rmse: coordinate descent on the codes.
float MakeQ3Quants(int n, int nmax, const float* x, int8_t* L) {
  const float max = LargestMagnitude(x, n);
  if (std::fabs(max) < kGroupMaxEps) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    return 0.f;
  }
  const float iscale = -nmax / max;
  float sumlx = 0, suml2 = 0;
  for (int i = 0; i < n; ++i) {
    int l = NearestInt(iscale * x[i]);
    l = std::max(-nmax, std::min(nmax - 1, l));
    L[i] = static_cast<int8_t>(l);
    const float w = x[i] * x[i];
    sumlx += w * x[i] * l;
    suml2 += w * l * l;
  }
  for (int itry = 0; itry < 5; ++itry) {
    int n_changed = 0;
    for (int i = 0; i < n; ++i) {
      const float w = x[i] * x[i];
      float slx = sumlx - w * x[i] * L[i];
      if (slx > 0) {
        float sl2 = suml2 - w * L[i] * L[i];
        int new_l = NearestInt(x[i] * sl2 / slx);
        new_l = std::max(-nmax, std::min(nmax - 1, new_l));
        if (new_l != L[i]) {
          slx += w * x[i] * new_l;
          sl2 += w * new_l * new_l;
          if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
            L[i] = static_cast<int8_t>(new_l);
            sumlx = slx;
            suml2 = sl2;
            ++n_changed;
          }
        }
      }
    }
    if (!n_changed) break;
  }
  for (int i = 0; i < n; ++i) L[i] = static_cast<int8_t>(L[i] + nmax);
  return suml2 > 0 ? sumlx / suml2 : 0.0f;
}

// Q4_K / Q5_K shared part: 8 sub-blocks of 32 → 6-bit scales and mins, the
// f16 super-scales, and the final codes L[256] in [0, nmax].
template <class Block>
void QuantizeK45(const float* x, int nmax, float rmin, int nstep, Block* y, uint8_t* L) {
  uint8_t Laux[32];
  float weights[32], mins[8], scales[8];
  float max_scale = 0, max_min = 0;
  for (int j = 0; j < 8; ++j) {
    float sum_x2 = 0;
    for (int l = 0; l < 32; ++l) sum_x2 += x[32 * j + l] * x[32 * j + l];
    const float av_x = std::sqrt(sum_x2 / 32);
    for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(x[32 * j + l]);
    scales[j] = MakeQkx2Quants(32, nmax, x + 32 * j, weights, L + 32 * j, &mins[j], Laux, rmin, 0.1f, nstep, false);
    max_scale = std::max(max_scale, scales[j]);
    max_min = std::max(max_min, mins[j]);
  }
  const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
  const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
  std::memset(y->scales, 0, 12);
  for (int j = 0; j < 8; ++j) {
    const uint8_t ls = static_cast<uint8_t>(std::min(63, NearestInt(inv_scale * scales[j])));
    const uint8_t lm = static_cast<uint8_t>(std::min(63, NearestInt(inv_min * mins[j])));
    if (j < 4) {
      y->scales[j] = ls;
      y->scales[j + 4] = lm;
    } else {
      y->scales[j + 4] = (ls & 0xF) | ((lm & 0xF) << 4);
      y->scales[j - 4] |= ((ls >> 4) << 6);
      y->scales[j - 0] |= ((lm >> 4) << 6);
    }
  }
  y->d = F16FromF32(max_scale / 63.f);
  y->dmin = F16FromF32(max_min / 63.f);
  for (int j = 0; j < 8; ++j) {
    uint8_t sc, m;
    KScaleMin(j, y->scales, &sc, &m);
    const float d = F32FromF16(y->d) * sc;
    if (!d) continue;
    const float dm = F32FromF16(y->dmin) * m;
    for (int ii = 0; ii < 32; ++ii) {
      const int l = NearestInt((x[32 * j + ii] + dm) / d);
      L[32 * j + ii] = static_cast<uint8_t>(std::max(0, std::min(nmax, l)));
    }
  }
}

// ggml's best_index_int8: the index of the codebook value nearest x.
int BestIndex(const int8_t* val, float x) {
  if (x <= val[0]) return 0;
  if (x >= val[15]) return 15;
  int ml = 0, mu = 15;
  while (mu - ml > 1) {
    const int mav = (ml + mu) / 2;
    if (x < val[mav]) mu = mav; else ml = mav;
  }
  return x - val[mu - 1] < val[mu] - x ? mu - 1 : mu;
}

// ggml's quantize_row_iq4_nl_impl without importance weights (ntry 7):
// x[super] in blocks of 32; IQ4_NL when super == 32 (d = the block scale),
// IQ4_XS when super == 256 (6-bit block scales under one f16 d).
void QuantizeIq4(int super, const float* x, uint16_t* dh, uint8_t* q4, uint16_t* scales_h, uint8_t* scales_l) {
  constexpr int kBlock = 32, kTry = 7;
  const int8_t* values = kIq4nlValues;
  uint8_t L[kSuperBlock];
  float scales[kSuperBlock / kBlock], weight[kBlock];
  std::memset(q4, 0, super / 2);
  *dh = F16FromF32(0.f);
  for (int ib = 0; ib < super / kBlock; ++ib) {
    const float* xb = x + ib * kBlock;
    uint8_t* Lb = L + ib * kBlock;
    for (int j = 0; j < kBlock; ++j) weight[j] = xb[j] * xb[j];
    const float max = LargestMagnitude(xb, kBlock);
    if (std::fabs(max) < kGroupMaxEps) {
      scales[ib] = 0;
      for (int j = 0; j < kBlock; ++j) Lb[j] = static_cast<uint8_t>(BestIndex(values, 0.0f));
      continue;
    }
    float d = -max / values[0];
    float id = 1 / d;
    float sumqx = 0, sumq2 = 0;
    for (int j = 0; j < kBlock; ++j) {
      const int l = BestIndex(values, id * xb[j]);
      Lb[j] = static_cast<uint8_t>(l);
      const float q = values[l];
      sumqx += weight[j] * q * xb[j];
      sumq2 += weight[j] * q * q;
    }
    d = sumqx / sumq2;
    float best = d * sumqx;
    for (int itry = -kTry; itry <= kTry; ++itry) {
      id = (itry + values[0]) / max;
      sumqx = sumq2 = 0;
      for (int j = 0; j < kBlock; ++j) {
        const float q = values[BestIndex(values, id * xb[j])];
        sumqx += weight[j] * q * xb[j];
        sumq2 += weight[j] * q * q;
      }
      if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
        d = sumqx / sumq2;
        best = d * sumqx;
      }
    }
    scales[ib] = d;
  }
  const float max_scale = LargestMagnitude(scales, super / kBlock);
  if (super > kBlock) {
    *scales_h = 0;
    const float d = -max_scale / 32;
    *dh = F16FromF32(d);
    const float id = d ? 1 / d : 0.f;
    for (int ib = 0; ib < super / kBlock; ++ib) {
      int l = NearestInt(id * scales[ib]);
      l = std::max(-32, std::min(31, l));
      const float dl = d * l;
      const float idl = dl ? 1 / dl : 0.f;
      for (int j = 0; j < kBlock; ++j) L[ib * kBlock + j] = static_cast<uint8_t>(BestIndex(values, idl * x[ib * kBlock + j]));
      l += 32;
      if (ib % 2 == 0) scales_l[ib / 2] = l & 0xf;
      else scales_l[ib / 2] |= (l & 0xf) << 4;
      *scales_h |= static_cast<uint16_t>((l >> 4) << 2 * (ib % 16));
    }
  } else {
    *dh = F16FromF32(scales[0]);
    const float id = scales[0] ? 1 / scales[0] : 0;
    for (int j = 0; j < super; ++j) L[j] = static_cast<uint8_t>(BestIndex(values, id * x[j]));
  }
  for (int i = 0; i < super / 32; ++i) {
    for (int j = 0; j < 16; ++j) q4[16 * i + j] = L[32 * i + j] | (L[32 * i + 16 + j] << 4);
  }
}

// The smallest and largest of a block's kQuantBlock values (the Q4_1/Q5_1
// range; NaNs are skipped).
void BlockMinMax(const float* x, float* min, float* max) {
  *min = FLT_MAX;
  *max = -FLT_MAX;
  for (int j = 0; j < kQuantBlock; ++j) {
    *min = std::min(*min, x[j]);
    *max = std::max(*max, x[j]);
  }
}

}  // namespace

void QuantizeRowQ4_1(const float* x, size_t n, BlockQ4_1* y) {
  for (size_t i = 0; i < n / kQuantBlock; ++i, x += kQuantBlock) {
    float min, max;
    BlockMinMax(x, &min, &max);
    const float d = (max - min) / 15;
    const float id = d ? 1.0f / d : 0.0f;
    y[i].d = F16FromF32(d);
    y[i].m = F16FromF32(min);
    for (int j = 0; j < 16; ++j) {
      const int xi0 = std::min(15, static_cast<int>(static_cast<int8_t>((x[j] - min) * id + 0.5f)));
      const int xi1 = std::min(15, static_cast<int>(static_cast<int8_t>((x[j + 16] - min) * id + 0.5f)));
      y[i].qs[j] = static_cast<uint8_t>(xi0 | (xi1 << 4));
    }
  }
}

void QuantizeRowQ5_0(const float* x, size_t n, BlockQ5_0* y) {
  for (size_t i = 0; i < n / kQuantBlock; ++i, x += kQuantBlock) {
    const float d = LargestMagnitude(x, kQuantBlock) / -16;
    const float id = d ? 1.0f / d : 0.0f;
    y[i].d = F16FromF32(d);
    uint32_t qh = 0;
    for (int j = 0; j < 16; ++j) {
      const uint8_t xi0 = static_cast<uint8_t>(std::min(31, static_cast<int>(static_cast<int8_t>(x[j] * id + 16.5f))));
      const uint8_t xi1 = static_cast<uint8_t>(std::min(31, static_cast<int>(static_cast<int8_t>(x[j + 16] * id + 16.5f))));
      y[i].qs[j] = (xi0 & 0x0F) | ((xi1 & 0x0F) << 4);
      qh |= ((xi0 & 0x10u) >> 4) << (j + 0);
      qh |= ((xi1 & 0x10u) >> 4) << (j + 16);
    }
    std::memcpy(y[i].qh, &qh, sizeof(qh));
  }
}

void QuantizeRowQ5_1(const float* x, size_t n, BlockQ5_1* y) {
  for (size_t i = 0; i < n / kQuantBlock; ++i, x += kQuantBlock) {
    float min, max;
    BlockMinMax(x, &min, &max);
    const float d = (max - min) / 31;
    const float id = d ? 1.0f / d : 0.0f;
    y[i].d = F16FromF32(d);
    y[i].m = F16FromF32(min);
    uint32_t qh = 0;
    for (int j = 0; j < 16; ++j) {
      const uint8_t xi0 = static_cast<uint8_t>((x[j] - min) * id + 0.5f);
      const uint8_t xi1 = static_cast<uint8_t>((x[j + 16] - min) * id + 0.5f);
      y[i].qs[j] = (xi0 & 0x0F) | ((xi1 & 0x0F) << 4);
      qh |= ((xi0 & 0x10u) >> 4) << (j + 0);
      qh |= ((xi1 & 0x10u) >> 4) << (j + 16);
    }
    std::memcpy(y[i].qh, &qh, sizeof(qh));
  }
}

void QuantizeRowQ2_K(const float* x, size_t n, BlockQ2_K* y) {
  constexpr float q4scale = 15.f;
  for (size_t i = 0; i < n / kSuperBlock; ++i, x += kSuperBlock) {
    uint8_t L[kSuperBlock], Laux[16];
    float weights[16], mins[16], scales[16];
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < 16; ++j) {
      for (int l = 0; l < 16; ++l) weights[l] = std::fabs(x[16 * j + l]);
      scales[j] = MakeQkx2Quants(16, 3, x + 16 * j, weights, L + 16 * j, &mins[j], Laux, -0.5f, 0.1f, 15, true);
      max_scale = std::max(max_scale, scales[j]);
      max_min = std::max(max_min, mins[j]);
    }
    if (max_scale > 0) {
      const float iscale = q4scale / max_scale;
      for (int j = 0; j < 16; ++j) y[i].scales[j] = static_cast<uint8_t>(NearestInt(iscale * scales[j]));
      y[i].d = F16FromF32(max_scale / q4scale);
    } else {
      for (int j = 0; j < 16; ++j) y[i].scales[j] = 0;
      y[i].d = F16FromF32(0.f);
    }
    if (max_min > 0) {
      const float iscale = q4scale / max_min;
      for (int j = 0; j < 16; ++j) y[i].scales[j] |= static_cast<uint8_t>(NearestInt(iscale * mins[j]) << 4);
      y[i].dmin = F16FromF32(max_min / q4scale);
    } else {
      y[i].dmin = F16FromF32(0.f);
    }
    for (int j = 0; j < 16; ++j) {
      const float d = F32FromF16(y[i].d) * (y[i].scales[j] & 0xF);
      if (!d) continue;
      const float dm = F32FromF16(y[i].dmin) * (y[i].scales[j] >> 4);
      for (int ii = 0; ii < 16; ++ii) {
        const int l = NearestInt((x[16 * j + ii] + dm) / d);
        L[16 * j + ii] = static_cast<uint8_t>(std::max(0, std::min(3, l)));
      }
    }
    for (int j = 0; j < kSuperBlock; j += 128) {
      for (int l = 0; l < 32; ++l) {
        y[i].qs[j / 4 + l] = L[j + l] | (L[j + l + 32] << 2) | (L[j + l + 64] << 4) | (L[j + l + 96] << 6);
      }
    }
  }
}

void QuantizeRowQ3_K(const float* x, size_t n, BlockQ3_K* y) {
  for (size_t i = 0; i < n / kSuperBlock; ++i, x += kSuperBlock) {
    int8_t L[kSuperBlock];
    float scales[16];
    for (int j = 0; j < 16; ++j) scales[j] = MakeQ3Quants(16, 4, x + 16 * j, L + 16 * j);
    const float max_scale = LargestMagnitude(scales, 16);
    std::memset(y[i].scales, 0, 12);
    if (max_scale) {
      const float iscale = -32.f / max_scale;
      for (int j = 0; j < 16; ++j) {
        int l = NearestInt(iscale * scales[j]);
        l = std::max(-32, std::min(31, l)) + 32;
        if (j < 8) y[i].scales[j] = l & 0xF;
        else y[i].scales[j - 8] |= (l & 0xF) << 4;
        l >>= 4;
        y[i].scales[j % 4 + 8] |= l << (2 * (j / 4));
      }
      y[i].d = F16FromF32(1 / iscale);
    } else {
      y[i].d = F16FromF32(0.f);
    }
    for (int j = 0; j < 16; ++j) {
      int sc = j < 8 ? y[i].scales[j] & 0xF : y[i].scales[j - 8] >> 4;
      sc = (sc | (((y[i].scales[8 + j % 4] >> (2 * (j / 4))) & 3) << 4)) - 32;
      const float d = F32FromF16(y[i].d) * sc;
      if (!d) continue;
      for (int ii = 0; ii < 16; ++ii) {
        const int l = NearestInt(x[16 * j + ii] / d);
        L[16 * j + ii] = static_cast<int8_t>(std::max(-4, std::min(3, l)) + 4);
      }
    }
    std::memset(y[i].hmask, 0, 32);
    int m = 0;
    uint8_t hm = 1;
    for (int j = 0; j < kSuperBlock; ++j) {
      if (L[j] > 3) {
        y[i].hmask[m] |= hm;
        L[j] -= 4;
      }
      if (++m == 32) {
        m = 0;
        hm <<= 1;
      }
    }
    for (int j = 0; j < kSuperBlock; j += 128) {
      for (int l = 0; l < 32; ++l) {
        y[i].qs[j / 4 + l] = static_cast<uint8_t>(L[j + l] | (L[j + l + 32] << 2) | (L[j + l + 64] << 4) | (L[j + l + 96] << 6));
      }
    }
  }
}

void QuantizeRowQ4_K(const float* x, size_t n, BlockQ4_K* y) {
  for (size_t i = 0; i < n / kSuperBlock; ++i, x += kSuperBlock) {
    uint8_t L[kSuperBlock];
    QuantizeK45(x, 15, -1.f, 20, &y[i], L);
    uint8_t* q = y[i].qs;
    for (int j = 0; j < kSuperBlock; j += 64, q += 32) {
      for (int l = 0; l < 32; ++l) q[l] = L[j + l] | (L[j + l + 32] << 4);
    }
  }
}

void QuantizeRowQ5_K(const float* x, size_t n, BlockQ5_K* y) {
  for (size_t i = 0; i < n / kSuperBlock; ++i, x += kSuperBlock) {
    uint8_t L[kSuperBlock];
    QuantizeK45(x, 31, -0.5f, 15, &y[i], L);
    uint8_t* qh = y[i].qh;
    uint8_t* ql = y[i].qs;
    std::memset(qh, 0, 32);
    uint8_t m1 = 1, m2 = 2;
    for (int n64 = 0; n64 < kSuperBlock; n64 += 64, ql += 32) {
      for (int j = 0; j < 32; ++j) {
        int l1 = L[n64 + j];
        if (l1 > 15) {
          l1 -= 16;
          qh[j] |= m1;
        }
        int l2 = L[n64 + j + 32];
        if (l2 > 15) {
          l2 -= 16;
          qh[j] |= m2;
        }
        ql[j] = static_cast<uint8_t>(l1 | (l2 << 4));
      }
      m1 <<= 2;
      m2 <<= 2;
    }
  }
}

void QuantizeRowQ6_K(const float* x, size_t n, BlockQ6_K* y) {
  for (size_t i = 0; i < n / kSuperBlock; ++i, x += kSuperBlock) {
    int8_t L[kSuperBlock];
    float scales[16];
    for (int ib = 0; ib < 16; ++ib) scales[ib] = MakeQxQuants(16, 32, x + 16 * ib, L + 16 * ib);
    const float max_scale = LargestMagnitude(scales, 16);
    if (std::fabs(max_scale) < kGroupMaxEps) {
      std::memset(&y[i], 0, sizeof(BlockQ6_K));
      continue;
    }
    const float iscale = -128.f / max_scale;
    y[i].d = F16FromF32(1 / iscale);
    for (int ib = 0; ib < 16; ++ib) y[i].scales[ib] = static_cast<int8_t>(std::min(127, NearestInt(iscale * scales[ib])));
    for (int j = 0; j < 16; ++j) {
      const float d = F32FromF16(y[i].d) * y[i].scales[j];
      if (!d) continue;
      for (int ii = 0; ii < 16; ++ii) {
        const int l = NearestInt(x[16 * j + ii] / d);
        L[16 * j + ii] = static_cast<int8_t>(std::max(-32, std::min(31, l)) + 32);
      }
    }
    uint8_t* ql = y[i].ql;
    uint8_t* qh = y[i].qh;
    for (int j = 0; j < kSuperBlock; j += 128, ql += 64, qh += 32) {
      for (int l = 0; l < 32; ++l) {
        const uint8_t q1 = L[j + l + 0] & 0xF, q2 = L[j + l + 32] & 0xF;
        const uint8_t q3 = L[j + l + 64] & 0xF, q4 = L[j + l + 96] & 0xF;
        ql[l + 0] = q1 | (q3 << 4);
        ql[l + 32] = q2 | (q4 << 4);
        qh[l] = static_cast<uint8_t>((L[j + l] >> 4) | ((L[j + l + 32] >> 4) << 2) | ((L[j + l + 64] >> 4) << 4) |
                                     ((L[j + l + 96] >> 4) << 6));
      }
    }
  }
}

void QuantizeRowIQ4_NL(const float* x, size_t n, BlockIQ4_NL* y) {
  for (size_t i = 0; i < n / kQuantBlock; ++i, x += kQuantBlock) {
    uint16_t unused_h;
    uint8_t unused_l[4];
    QuantizeIq4(kQuantBlock, x, &y[i].d, y[i].qs, &unused_h, unused_l);
  }
}

void QuantizeRowIQ4_XS(const float* x, size_t n, BlockIQ4_XS* y) {
  for (size_t i = 0; i < n / kSuperBlock; ++i, x += kSuperBlock) {
    QuantizeIq4(kSuperBlock, x, &y[i].d, y[i].qs, &y[i].scales_h, y[i].scales_l);
  }
}

}  // namespace kvedge
