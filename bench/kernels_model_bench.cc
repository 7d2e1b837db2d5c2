// Weight matvec / matmul throughput on TinyLlama-1.1B shapes for every weight
// format, in weight bytes/s; MemoryRead (kernels_kv_bench.cc, same binary)
// gives the memory-bandwidth bound.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "platform/thread_arena.h"
#include "simd/model_kernels.h"
#include "simd/weight_quant.h"

namespace kvedge {
namespace {

// A random [rows][cols] matrix in `type`, in one buffer (no per-row padding,
// like a mapped GGUF tensor).
class BenchMatrix {
 public:
  BenchMatrix(WeightType type, size_t rows, size_t cols)
      : storage_(rows * WeightRowBytes(type, cols) / sizeof(uint64_t) + 1) {
    std::mt19937 rng(1);
    std::normal_distribution<float> dist(0.0f, 0.05f);
    std::vector<float> row(cols);
    const size_t row_bytes = WeightRowBytes(type, cols);
    uint8_t* base = reinterpret_cast<uint8_t*>(storage_.data());
    for (size_t r = 0; r < rows; ++r) {
      for (float& f : row) f = dist(rng);
      uint8_t* dst = base + r * row_bytes;
      switch (type) {
        case WeightType::kF32: std::memcpy(dst, row.data(), row_bytes); break;
        case WeightType::kF16: QuantizeRowF16(row.data(), cols, reinterpret_cast<uint16_t*>(dst)); break;
        case WeightType::kBF16: QuantizeRowBF16(row.data(), cols, reinterpret_cast<uint16_t*>(dst)); break;
        case WeightType::kQ8_0: QuantizeRowQ8_0(row.data(), cols, reinterpret_cast<BlockQ8_0*>(dst)); break;
        case WeightType::kQ4_0: QuantizeRowQ4_0(row.data(), cols, reinterpret_cast<BlockQ4_0*>(dst)); break;
      }
    }
    view_ = MatrixView{type, base, rows, cols};
  }
  const MatrixView& view() const { return view_; }
  size_t bytes() const { return view_.rows * WeightRowBytes(view_.type, view_.cols); }

 private:
  std::vector<uint64_t> storage_;
  MatrixView view_;
};

std::vector<float> RandomInput(size_t n) {
  std::mt19937 rng(2);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(n);
  for (float& f : x) f = dist(rng);
  return x;
}

void BM_MatVec(benchmark::State& state, WeightType type, size_t rows, size_t cols, int threads) {
  const BenchMatrix m(type, rows, cols);
  const std::vector<float> x = RandomInput(cols);
  std::vector<float> y(rows);
  std::unique_ptr<ThreadArena> arena;
  if (threads > 1) arena = ThreadArena::Create(threads).value();
  for (auto _ : state) {
    MatVec(m.view(), x.data(), y.data(), arena.get());
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * m.bytes()));
}

// MatVec straight from DRAM: cycles through copies of a 32000x2048 matrix
// (the TinyLlama classifier shape) totalling ≥ 512 MiB, so no iteration finds
// its weights in the 32 MiB-class L3 (a single 37–65 MB matrix still gets
// partial L3 hits from the previous iteration). Bytes/s against MemoryRead is
// the decode-relevant fraction.
void BM_MatVecStream(benchmark::State& state, WeightType type, int threads) {
  constexpr size_t kRows = 32000, kCols = 2048;
  const BenchMatrix first(type, kRows, kCols);
  const size_t bytes = first.bytes();
  const size_t copies = ((size_t{512} << 20) + bytes - 1) / bytes;
  std::vector<std::vector<uint64_t>> storage(copies, std::vector<uint64_t>(bytes / sizeof(uint64_t) + 1));
  for (auto& c : storage) std::memcpy(c.data(), first.view().data, bytes);
  const std::vector<float> x = RandomInput(kCols);
  std::vector<float> y(kRows);
  std::unique_ptr<ThreadArena> arena;
  if (threads > 1) arena = ThreadArena::Create(threads).value();
  size_t i = 0;
  for (auto _ : state) {
    const MatrixView m{type, storage[i].data(), kRows, kCols};
    MatVec(m, x.data(), y.data(), arena.get());
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
    i = (i + 1) % copies;
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bytes));
}

void BM_MatMul(benchmark::State& state, WeightType type, size_t rows, size_t cols, size_t batch) {
  const BenchMatrix m(type, rows, cols);
  const std::vector<float> x = RandomInput(batch * cols);  // [batch][cols]
  std::vector<float> y(batch * rows);                        // [batch][rows]
  for (auto _ : state) {
    MatMul(m.view(), x.data(), batch, y.data(), nullptr);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * m.bytes()));
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * batch));
}

// Registers every format × TinyLlama-1.1B shape (q/o, k/v, gate/up, down,
// classifier), single-threaded and on a 2-thread arena, plus prefill tiles.
int RegisterAll() {
  const WeightType types[] = {WeightType::kF32, WeightType::kF16, WeightType::kBF16, WeightType::kQ8_0,
                              WeightType::kQ4_0};
  const size_t shapes[][2] = {{2048, 2048}, {256, 2048}, {5632, 2048}, {2048, 5632}, {32000, 2048}};
  for (WeightType t : types) {
    for (const auto& s : shapes) {
      const std::string name =
          std::string("MatVec/") + WeightTypeName(t) + "/" + std::to_string(s[0]) + "x" + std::to_string(s[1]);
      benchmark::RegisterBenchmark(name.c_str(), BM_MatVec, t, s[0], s[1], 1)->UseRealTime();
      benchmark::RegisterBenchmark((name + "/threads:2").c_str(), BM_MatVec, t, s[0], s[1], 2)->UseRealTime();
    }
  }
  for (WeightType t : {WeightType::kQ8_0, WeightType::kQ4_0}) {
    const std::string name = std::string("MatVec/") + WeightTypeName(t) + "/32000x2048/dram";
    benchmark::RegisterBenchmark(name.c_str(), BM_MatVecStream, t, 1)->UseRealTime();
    benchmark::RegisterBenchmark((name + "/threads:2").c_str(), BM_MatVecStream, t, 2)->UseRealTime();
  }
  for (WeightType t : types) {
    for (size_t batch : {8u, 32u}) {
      const std::string name =
          std::string("MatMul/") + WeightTypeName(t) + "/2048x2048/batch:" + std::to_string(batch);
      benchmark::RegisterBenchmark(name.c_str(), BM_MatMul, t, 2048, 2048, batch)->UseRealTime();
    }
  }
  return 0;
}

const int kRegistered = RegisterAll();

}  // namespace
}  // namespace kvedge
