// Two-level RoPE angle table.
#include "kvcache/rope_table.h"

#include "simd/kv_kernels.h"

namespace kvedge {

RopeTable::RopeTable(double theta, int rope_dim, int max_distance, float* storage)
    : theta_(theta), rope_dim_(rope_dim), max_distance_(max_distance) {
  float* fine = storage;
  float* coarse = storage + static_cast<size_t>(kFine) * rope_dim;
  for (int lo = 0; lo < kFine; ++lo) RopeAngles(theta, rope_dim, lo, fine + static_cast<size_t>(lo) * rope_dim);
  const int n_coarse = max_distance / kFine + 1;
  for (int hi = 0; hi < n_coarse; ++hi) {
    RopeAngles(theta, rope_dim, static_cast<int64_t>(hi) * kFine, coarse + static_cast<size_t>(hi) * rope_dim);
  }
  fine_ = fine;
  coarse_ = coarse;
}

void RopeTable::Angles(int64_t d, float* out) const {
  const int half = rope_dim_ / 2;
  if (d < 0 || d > max_distance_) {
    RopeAngles(theta_, rope_dim_, d, out);
    return;
  }
  const float* a = coarse_ + static_cast<size_t>(d / kFine) * rope_dim_;
  const float* b = fine_ + static_cast<size_t>(d % kFine) * rope_dim_;
  for (int i = 0; i < half; ++i) {
    const float ca = a[i], sa = a[half + i], cb = b[i], sb = b[half + i];
    out[i] = ca * cb - sa * sb;         // cos(α+β)
    out[half + i] = sa * cb + ca * sb;  // sin(α+β)
  }
}

}  // namespace kvedge
