// RopeTable: cos/sin of θ_i·d for every rotated pair i and any distance d,
// from two small tables (d = 64·hi + lo, angle sum identities) built in
// double precision, so per-block query rotations cost a few multiplies.
#ifndef KVEDGE_KVCACHE_ROPE_TABLE_H_
#define KVEDGE_KVCACHE_ROPE_TABLE_H_

#include <cstddef>
#include <cstdint>

namespace kvedge {

// Non-owning view over caller memory of RopeTable::Bytes(...) bytes.
class RopeTable {
 public:
  static constexpr int kFine = 64;
  static size_t Floats(int rope_dim, int max_distance) {
    return static_cast<size_t>(kFine + max_distance / kFine + 1) * static_cast<size_t>(rope_dim);
  }
  RopeTable() = default;
  // Fills `storage` (Floats(...) floats). Distances above max_distance are
  // still exact, computed directly (slower; absolute positions and post-RoPE
  // keys only).
  RopeTable(double theta, int rope_dim, int max_distance, float* storage);

  // out[0..rope_dim/2) = cos θ_i·d, out[rope_dim/2..rope_dim) = sin θ_i·d.
  void Angles(int64_t distance, float* out) const;
  int rope_dim() const { return rope_dim_; }

 private:
  double theta_ = 10000.0;
  int rope_dim_ = 0;
  int max_distance_ = 0;
  const float* fine_ = nullptr;    // [kFine][rope_dim]: cos/sin of θ_i·lo
  const float* coarse_ = nullptr;  // [n][rope_dim]: cos/sin of θ_i·64·hi
};

}  // namespace kvedge

#endif  // KVEDGE_KVCACHE_ROPE_TABLE_H_
