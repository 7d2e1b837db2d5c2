// Weight matvec / matmul throughput on TinyLlama-1.1B shapes for every weight
// format, in weight bytes/s; MemoryRead (kernels_kv_bench.cc, same binary)
// gives the memory-bandwidth bound.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "platform/memory.h"
#include "platform/target_report.h"
#include "platform/thread_arena.h"
#include "simd/model_kernels.h"
#include "simd/weight_format.h"
#include "simd/weight_quant.h"

namespace kvedge {
namespace {

// A random [rows][cols] matrix in `type` and `layout`, in one 64-byte aligned
// buffer (no per-row padding, like a mapped GGUF tensor or a loader's
// interleaved copy). Only the first kDistinctRows rows are quantized; the rest
// repeat them (the kernels' time does not depend on the values, and the
// searching quantizers — IQ4_XS, the K-quants — would otherwise spend minutes
// per 32000-row matrix).
class BenchMatrix {
 public:
  BenchMatrix(WeightType type, WeightLayout layout, size_t rows, size_t cols) {
    constexpr size_t kDistinctRows = 256;
    std::mt19937 rng(1);
    std::normal_distribution<float> dist(0.0f, 0.05f);
    std::vector<float> row(cols);
    const size_t row_bytes = WeightRowBytes(type, cols);
    AlignedBuffer rows_buf = AlignedBuffer::Allocate(rows * row_bytes, "bench matrix").value();
    for (size_t r = 0; r < rows; ++r) {
      uint8_t* dst = rows_buf.data() + r * row_bytes;
      if (r >= kDistinctRows) {
        std::memcpy(dst, rows_buf.data() + (r % kDistinctRows) * row_bytes, row_bytes);
        continue;
      }
      for (float& f : row) f = dist(rng);
      GetWeightFormat(type).quantize(row.data(), dst, cols);
    }
    view_ = MatrixView{type, rows_buf.data(), rows, cols};
    if (layout == WeightLayout::kInterleaved16) {
      storage_ = AlignedBuffer::Allocate(MatrixBytes(type, layout, rows, cols), "bench matrix").value();
      InterleaveGroups(view_, 0, InterleavedGroups(rows), storage_.data());
      view_ = InterleavedView(view_, storage_.data());
    } else {
      storage_ = std::move(rows_buf);
    }
  }
  const MatrixView& view() const { return view_; }
  size_t bytes() const { return MatrixBytes(view_.type, view_.layout, view_.rows, view_.cols); }

 private:
  AlignedBuffer storage_;
  MatrixView view_;
};

// "q4_0" (GGUF rows) or "q4_0.il16" (kInterleaved16).
std::string FormatName(WeightType t, WeightLayout layout) {
  return std::string(WeightTypeName(t)) + (layout == WeightLayout::kInterleaved16 ? ".il16" : "");
}

std::vector<float> RandomInput(size_t n) {
  std::mt19937 rng(2);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(n);
  for (float& f : x) f = dist(rng);
  return x;
}

void BM_MatVec(benchmark::State& state, WeightType type, WeightLayout layout, size_t rows, size_t cols,
               int threads) {
  const BenchMatrix m(type, layout, rows, cols);
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

// MatVec (batch 1) or MatMul straight from DRAM: cycles through copies of a
// rows × cols matrix (32000x2048: the TinyLlama classifier; the batch-8 rows
// also take its other shapes) totalling ≥ 512 MiB, so
// no iteration finds its weights in the 32 MiB-class L3 (a single 37–65 MB
// matrix still gets partial L3 hits from the previous iteration). Bytes/s
// against MemoryRead is the decode-relevant fraction; with a batch (decode
// streams stepped together) the kernel should stop waiting on DRAM.
void BM_MatMulStream(benchmark::State& state, WeightType type, WeightLayout layout, int threads, size_t batch,
                     size_t rows, size_t cols) {
  const BenchMatrix first(type, layout, rows, cols);
  const size_t bytes = first.bytes();
  const size_t copies = ((size_t{512} << 20) + bytes - 1) / bytes;
  std::vector<AlignedBuffer> storage;
  for (size_t c = 0; c < copies; ++c) {
    // 2 MiB pages where the kernel gives them, as the model's interleaved
    // weights get (model_loader.cc): with 4 KiB pages the batch-8 rows ran
    // 7–12 % slower on TLB misses the model does not have.
    storage.push_back(AlignedBuffer::AllocatePages(bytes, "bench matrix copy").value());
    std::memcpy(storage.back().data(), first.view().data, bytes);
  }
  const std::vector<float> x = RandomInput(batch * cols);  // [batch][cols]
  std::vector<float> y(batch * rows);                        // [batch][rows]
  std::unique_ptr<ThreadArena> arena;
  if (threads > 1) arena = ThreadArena::Create(threads).value();
  size_t i = 0;
  for (auto _ : state) {
    MatrixView m = first.view();
    m.data = storage[i].data();
    if (batch == 1) {
      MatVec(m, x.data(), y.data(), arena.get());
    } else {
      MatMul(m, x.data(), batch, y.data(), arena.get());
    }
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
    i = (i + 1) % copies;
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bytes));
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * batch));
}

void BM_MatMul(benchmark::State& state, WeightType type, WeightLayout layout, size_t rows, size_t cols,
               size_t batch) {
  const BenchMatrix m(type, layout, rows, cols);
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

// Registers every format (Q8_0/Q4_0 in both layouts) × TinyLlama-1.1B shape
// (q/o, k/v, gate/up, down, classifier), single-threaded and on a 2-thread
// arena, the DRAM stream, and prefill tiles.
int RegisterAll() {
  // KVEDGE_SIMD=AVX2 (etc.) measures another target's kernels on this CPU.
  if (const Status s = RestrictDispatchFromEnvironment(); !s.ok()) {
    std::fprintf(stderr, "%s\n", s.message().c_str());
    std::exit(2);
  }
  benchmark::AddCustomContext("simd_dispatch", DispatchedTargetName());
  std::vector<std::pair<WeightType, WeightLayout>> formats;
  for (int t = 0; t < kNumWeightTypes; ++t) formats.emplace_back(static_cast<WeightType>(t), WeightLayout::kRows);
  for (int i = 0; i < kNumWeightTypes; ++i) {
    const auto t = static_cast<WeightType>(i);
    if (IsInterleavable(t)) formats.emplace_back(t, WeightLayout::kInterleaved16);
  }
  const size_t shapes[][2] = {{2048, 2048}, {256, 2048}, {5632, 2048}, {2048, 5632}, {32000, 2048}};
  for (const auto& [t, layout] : formats) {
    for (const auto& s : shapes) {
      const std::string name =
          "MatVec/" + FormatName(t, layout) + "/" + std::to_string(s[0]) + "x" + std::to_string(s[1]);
      benchmark::RegisterBenchmark(name.c_str(), BM_MatVec, t, layout, s[0], s[1], 1)->UseRealTime();
      benchmark::RegisterBenchmark((name + "/threads:2").c_str(), BM_MatVec, t, layout, s[0], s[1], 2)
          ->UseRealTime();
    }
  }
  for (const auto& [t, layout] : formats) {
    if (GetWeightFormat(t).kernel == WeightKernel::kFloat) continue;
    const std::string name = "MatVec/" + FormatName(t, layout) + "/32000x2048/dram";
    benchmark::RegisterBenchmark(name.c_str(), BM_MatMulStream, t, layout, 1, 1, 32000, 2048)->UseRealTime();
    benchmark::RegisterBenchmark((name + "/threads:2").c_str(), BM_MatMulStream, t, layout, 2, 1, 32000, 2048)
        ->UseRealTime();
  }
  // Batched decode from DRAM (issue 16): the formats of TinyLlama Q4_0 and Q4_K_M.
  for (const auto& [t, layout] : formats) {
    const bool q4_0_il = t == WeightType::kQ4_0 && layout == WeightLayout::kInterleaved16;
    if (!q4_0_il && GetWeightFormat(t).kernel != WeightKernel::kInt8K) continue;
    for (size_t batch : {4u, 8u, 16u}) {
      const std::string name = "MatMul/" + FormatName(t, layout) + "/32000x2048/dram/batch:" + std::to_string(batch);
      benchmark::RegisterBenchmark(name.c_str(), BM_MatMulStream, t, layout, 1, batch, 32000, 2048)->UseRealTime();
    }
    // The decode step's other matrices (q/o, k/v, gate/up, down), each from DRAM, at 8 streams.
    for (const auto& s : shapes) {
      if (s[0] == 32000) continue;
      const std::string name = "MatMul/" + FormatName(t, layout) + "/" + std::to_string(s[0]) + "x" +
                               std::to_string(s[1]) + "/dram/batch:8";
      benchmark::RegisterBenchmark(name.c_str(), BM_MatMulStream, t, layout, 1, 8, s[0], s[1])->UseRealTime();
    }
  }
  for (const auto& [t, layout] : formats) {
    for (size_t batch : {2u, 4u, 8u, 16u, 32u}) {  // decode streams (BatchDecoder) and prefill tiles
      const std::string name = "MatMul/" + FormatName(t, layout) + "/2048x2048/batch:" + std::to_string(batch);
      benchmark::RegisterBenchmark(name.c_str(), BM_MatMul, t, layout, 2048, 2048, batch)->UseRealTime();
    }
  }
  return 0;
}

const int kRegistered = RegisterAll();

}  // namespace
}  // namespace kvedge
