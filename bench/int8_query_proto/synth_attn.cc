// Attention-output error of int4 keys scored with exact f32 / int16 / int8
// query codes (per (query, block) after the key-scale fold, as kvedge's
// integer path), synthetic keys with outlier channels (kv_kernels_test's
// RealisticKeys), f32 values, no RoPE. Reports, per head dim, the mean over
// queries of rel-L2(out − out_ref) and KL(p_ref ‖ p) of the attention weights,
// against the f32-key attention and against int4 keys with exact scores.
#include <immintrin.h>
#include <math.h>
#include <stdio.h>
#include <algorithm>
#include <random>
#include <vector>
constexpr int G = 32;
static float F16(float x) { return _cvtsh_ss(_cvtss_sh(x, _MM_FROUND_TO_NEAREST_INT)); }
int main() {
  for (int D : {8, 16, 64, 128}) {
    std::mt19937 rng(7);
    std::normal_distribution<float> n01(0.f, 1.f);
    std::uniform_real_distribution<float> u(10.f, 30.f);
    const int NB = 128, NQ = 200;
    std::vector<float> mean(D), sig(D, 1.f);
    for (int c = 0; c < D; ++c) mean[c] = 0.5f * n01(rng);
    for (int i = 0; i < std::max(1, D / 32); ++i) { int c = rng() % D; mean[c] = (rng() % 2 ? 1.f : -1.f) * u(rng); sig[c] = 2.f; }
    // keys [b][c][t], codes, scales, mins; values [b*G+t][D]
    std::vector<float> k(NB * D * G), s(NB * D), m(NB * D), v(NB * G * D);
    std::vector<int> code(NB * D * G);
    for (int b = 0; b < NB; ++b) for (int c = 0; c < D; ++c) {
      float* x = &k[(b * D + c) * G];
      for (int t = 0; t < G; ++t) x[t] = mean[c] + sig[c] * n01(rng);
      float lo = *std::min_element(x, x + G), hi = *std::max_element(x, x + G);
      const float sh = F16((hi - lo) / 15.f), mh = F16(lo);
      s[b * D + c] = sh; m[b * D + c] = mh;
      for (int t = 0; t < G; ++t) code[(b * D + c) * G + t] = sh == 0 ? 0 : (int)std::clamp(nearbyintf((x[t] - mh) / sh), 0.f, 15.f);
    }
    for (auto& x : v) x = n01(rng);
    double acc[4][2] = {}, kl[4][2] = {};
    const float scale = 1.f / sqrtf((float)D);
    for (int qi = 0; qi < NQ; ++qi) {
      std::vector<float> q(D);
      for (auto& x : q) x = n01(rng);
      // mode 0: f32 keys; 1: int4 exact; 2: int16 q; 3: int8 q
      std::vector<std::vector<double>> p(4, std::vector<double>(NB * G)), out(4, std::vector<double>(D));
      for (int mode = 0; mode < 4; ++mode) {
        for (int b = 0; b < NB; ++b) {
          float qp[128]; int iq[128]; float amax = 0, bias = 0;
          for (int c = 0; c < D; ++c) { qp[c] = q[c] * s[b * D + c]; bias += q[c] * m[b * D + c]; amax = std::max(amax, fabsf(qp[c])); }
          const float L = mode == 2 ? 32767.f : 127.f, step = amax / L, inv = L / amax;
          for (int c = 0; c < D; ++c) iq[c] = (int)nearbyintf(qp[c] * inv);
          for (int t = 0; t < G; ++t) {
            double dot = 0;
            if (mode == 0) for (int c = 0; c < D; ++c) dot += (double)q[c] * k[(b * D + c) * G + t];
            else if (mode == 1) for (int c = 0; c < D; ++c) dot += (double)q[c] * (s[b * D + c] * code[(b * D + c) * G + t] + m[b * D + c]);
            else { long sum = 0; for (int c = 0; c < D; ++c) sum += (long)iq[c] * code[(b * D + c) * G + t]; dot = step * (double)sum + bias; }
            p[mode][b * G + t] = scale * dot;
          }
        }
        double mx = *std::max_element(p[mode].begin(), p[mode].end()), z = 0;
        for (auto& x : p[mode]) { x = exp(x - mx); z += x; }
        for (auto& x : p[mode]) x /= z;
        for (int j = 0; j < NB * G; ++j) for (int c = 0; c < D; ++c) out[mode][c] += p[mode][j] * v[j * D + c];
      }
      for (int mode = 1; mode < 4; ++mode) for (int r = 0; r < 2; ++r) {
        double e = 0, n = 0, kk = 0;
        for (int c = 0; c < D; ++c) { e += pow(out[mode][c] - out[r][c], 2); n += pow(out[r][c], 2); }
        for (int j = 0; j < NB * G; ++j) if (p[r][j] > 0) kk += p[r][j] * log(p[r][j] / std::max(p[mode][j], 1e-300));
        acc[mode][r] += sqrt(e / n) / NQ; kl[mode][r] += kk / NQ;
      }
    }
    printf("D=%3d  rel-L2 vs f32 keys: int4 exact %.3e  int16q %.3e  int8q %.3e | vs int4 exact: int16q %.3e int8q %.3e\n", D,
           acc[1][0], acc[2][0], acc[3][0], acc[2][1], acc[3][1]);
    printf("       KL   vs f32 keys: int4 exact %.3e  int16q %.3e  int8q %.3e | vs int4 exact: int16q %.3e int8q %.3e\n",
           kl[1][0], kl[2][0], kl[3][0], kl[2][1], kl[3][1]);
  }
}
