// RopeTable: table angles against the direct double-precision angles,
// inside the table, past its end and negative.
#include "kvcache/rope_table.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

namespace kvedge {
namespace {

TEST(RopeTableTest, AnglesMatchDirect) {
  for (int rope_dim : {2, 6, 64, 128}) {
    const int max_distance = 1000;
    std::vector<double> freqs(static_cast<size_t>(rope_dim / 2));
    DefaultRopeFrequencies(10000.0, rope_dim, freqs.data());
    std::vector<float> storage(RopeTable::Floats(rope_dim, max_distance));
    const RopeTable table(freqs.data(), rope_dim, max_distance, storage.data());
    // Distances inside the table, some past its end and negative.
    std::mt19937 rng(7);
    std::vector<int64_t> distances(150);
    for (size_t k = 0; k < distances.size(); ++k) {
      distances[k] = k % 17 == 3 ? 1000 + static_cast<int64_t>(rng() % 5000)
                     : k % 23 == 5 ? -static_cast<int64_t>(rng() % 300)
                                   : static_cast<int64_t>(rng() % 1001);
    }
    distances[0] = 0;
    distances[1] = max_distance;
    distances[2] = max_distance + 1;
    const size_t rd = static_cast<size_t>(rope_dim);
    std::vector<float> angles(rd), direct(rd);
    for (size_t k = 0; k < distances.size(); ++k) {
      table.Angles(distances[k], angles.data());
      RopeAnglesFromFrequencies(freqs.data(), rope_dim, distances[k], direct.data());
      const bool in_table = distances[k] >= 0 && distances[k] <= max_distance;
      for (size_t i = 0; i < rd; ++i) {
        if (in_table) {
          ASSERT_NEAR(angles[i], direct[i], 1e-6f) << rope_dim << " " << distances[k] << " " << i;
        } else {
          ASSERT_EQ(angles[i], direct[i]) << rope_dim << " " << distances[k] << " " << i;
        }
      }
    }
  }
}

}  // namespace
}  // namespace kvedge
