// Two-level RoPE angle table over per-pair frequencies.
#include "kvcache/rope_table.h"

#include <cmath>

#include "simd/kv_kernels.h"

namespace kvedge {

void DefaultRopeFrequencies(double base, int rope_dim, double* freqs) {
  for (int i = 0; i < rope_dim / 2; ++i) freqs[i] = std::pow(base, -2.0 * i / rope_dim);
}

void RopeAnglesFromFrequencies(const double* freqs, int rope_dim, int64_t distance, float* out) {
  const int half = rope_dim / 2;
  for (int i = 0; i < half; ++i) {
    const double angle = freqs[i] * static_cast<double>(distance);
    out[i] = static_cast<float>(std::cos(angle));
    out[half + i] = static_cast<float>(std::sin(angle));
  }
}

RopeTable::RopeTable(const double* freqs, int rope_dim, int max_distance, float* storage)
    : freqs_(freqs), rope_dim_(rope_dim), max_distance_(max_distance) {
  float* fine = storage;
  float* coarse = storage + static_cast<size_t>(kFine) * rope_dim;
  for (int lo = 0; lo < kFine; ++lo) {
    RopeAnglesFromFrequencies(freqs, rope_dim, lo, fine + static_cast<size_t>(lo) * rope_dim);
  }
  const int n_coarse = max_distance / kFine + 1;
  for (int hi = 0; hi < n_coarse; ++hi) {
    RopeAnglesFromFrequencies(freqs, rope_dim, static_cast<int64_t>(hi) * kFine,
                              coarse + static_cast<size_t>(hi) * rope_dim);
  }
  fine_ = fine;
  coarse_ = coarse;
}

void RopeTable::Angles(int64_t d, float* out) const {
  if (d < 0 || d > max_distance_) {
    RopeAnglesFromFrequencies(freqs_, rope_dim_, d, out);
    return;
  }
  RopeAnglesSum(rope_dim_, coarse_ + static_cast<size_t>(d / kFine) * rope_dim_,
                fine_ + static_cast<size_t>(d % kFine) * rope_dim_, out);
}

}  // namespace kvedge
