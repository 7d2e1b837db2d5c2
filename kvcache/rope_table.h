// RopeTable: cos/sin of θ_i·d for every rotated pair i and any distance d,
// from two small tables (d = 64·hi + lo, angle sum identities) built in
// double precision, so per-block query rotations cost a few multiplies.
// θ_i are per-pair frequencies (radians per position): rope_theta^(−2i/rope_dim)
// or whatever frequency factors and scaling make of them.
#ifndef KVEDGE_KVCACHE_ROPE_TABLE_H_
#define KVEDGE_KVCACHE_ROPE_TABLE_H_

#include <cstddef>
#include <cstdint>

namespace kvedge {

// freqs[i] = base^(−2i/rope_dim) for i < rope_dim/2 (the unscaled RoPE).
void DefaultRopeFrequencies(double base, int rope_dim, double* freqs);

// out[0..rope_dim/2) = cos θ_i·d, out[rope_dim/2..rope_dim) = sin θ_i·d, in
// double then rounded (the layout simd/kv_kernels.h's RopeAngles writes).
void RopeAnglesFromFrequencies(const double* freqs, int rope_dim, int64_t distance, float* out);

// Non-owning view over caller memory of Floats(...) floats and the caller's
// frequencies, which must outlive it.
class RopeTable {
 public:
  static constexpr int kFine = 64;
  static size_t Floats(int rope_dim, int max_distance) {
    return static_cast<size_t>(kFine + max_distance / kFine + 1) * static_cast<size_t>(rope_dim);
  }
  RopeTable() = default;
  // Fills `storage` (Floats(...) floats). Distances above max_distance are
  // still exact, computed directly (slower; absolute positions and post-RoPE
  // keys only). freqs: [rope_dim/2].
  RopeTable(const double* freqs, int rope_dim, int max_distance, float* storage);

  // out[0..rope_dim/2) = cos θ_i·d, out[rope_dim/2..rope_dim) = sin θ_i·d.
  void Angles(int64_t distance, float* out) const;
  int rope_dim() const { return rope_dim_; }

 private:
  const double* freqs_ = nullptr;  // [rope_dim/2]
  int rope_dim_ = 0;
  int max_distance_ = 0;
  const float* fine_ = nullptr;    // [kFine][rope_dim]: cos/sin of θ_i·lo
  const float* coarse_ = nullptr;  // [n][rope_dim]: cos/sin of θ_i·64·hi
};

}  // namespace kvedge

#endif  // KVEDGE_KVCACHE_ROPE_TABLE_H_
