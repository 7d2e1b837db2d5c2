// Single-threaded KV kernel benchmarks: machine read bandwidth, decode
// attention per KV format (scores + softmax + value sum, from memory, not
// cache) for one query head and for a GQA group of heads sharing a lane, and
// block sealing (quantization). Reports bytes/s and tokens/s.
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "platform/memory.h"
#include "platform/thread_arena.h"
#include "simd/kv_format.h"
#include "simd/kv_kernels.h"

namespace kvedge {
namespace {

constexpr int kG = kKvBlockTokens;
constexpr size_t kMiB = size_t{1} << 20;

// Streaming sum over 1 GiB (StreamRead): the single-thread read bandwidth
// the attention numbers are compared with.
// threads > 1: the same sum split into contiguous halves over a ThreadArena
// (the bound for 2-thread decode, whose weight rows are split the same way).
// pages: the buffer comes from AlignedBuffer::AllocatePages (2 MiB-aligned,
// transparent huge pages advised), as the loader's repacked weights do;
// otherwise from the heap (4 KiB pages where THP is madvise-only), as the
// matrices of the MatVec benchmarks (big KV arenas take huge pages:
// AlignedBuffer::AllocateStreamed).
void BM_MemoryRead(benchmark::State& state, int threads, bool pages) {
  const size_t bytes = size_t{1} << 30;
  AlignedBuffer buf = (pages ? AlignedBuffer::AllocatePages(bytes, "bench buffer")
                             : AlignedBuffer::Allocate(bytes, "bench buffer"))
                          .value();
  uint64_t* words = buf.as<uint64_t>();
  for (size_t i = 0; i < bytes / sizeof(uint64_t); ++i) words[i] = i;
  std::unique_ptr<ThreadArena> arena = ThreadArena::Create(threads).value();
  std::vector<uint64_t> totals(static_cast<size_t>(threads));
  for (auto _ : state) {
    arena->ParallelFor(bytes / 64, [&](size_t begin, size_t end, int thread) {
      totals[static_cast<size_t>(thread)] = StreamRead(words + 8 * begin, 64 * (end - begin));
    });
    benchmark::DoNotOptimize(totals.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bytes));
}

// Realistic-ish blocks: keys with a few outlier channels, Gaussian values.
// A pool of distinct encoded blocks is copied across the whole arena (the
// kernels' speed does not depend on the code values).
struct BlockPool {
  std::vector<std::vector<uint8_t>> keys, values;
  BlockPool(KvFormat f, int d) {
    std::mt19937 rng(1);
    std::normal_distribution<float> n01(0.0f, 1.0f);
    std::vector<float> k(static_cast<size_t>(d) * kG), v(k.size());
    for (int i = 0; i < 16; ++i) {
      for (int c = 0; c < d; ++c) {
        const float mean = c % 37 == 5 ? 20.0f : 0.3f;
        for (int t = 0; t < kG; ++t) k[c * kG + t] = mean + n01(rng);
      }
      for (float& x : v) x = n01(rng);
      keys.emplace_back(KeyBlockBytes(f, d));
      values.emplace_back(ValueBlockBytes(f, d));
      EncodeKeyBlock(f, d, k.data(), keys.back().data());
      EncodeValueBlock(f, d, v.data(), values.back().data());
    }
  }
};

// Lanes of ctx tokens in one arena, enough of them that the KV bytes touched
// per cycle exceed 256 MiB (every lane is cold when it comes round again), or
// with hot, one lane that stays in cache (the kernel's arithmetic alone).
struct LaneArena {
  size_t n_blocks, lane_bytes, lanes;
  AlignedBuffer arena;
  // [lane][block] key pointers, then value pointers; keys of a lane are
  // contiguous, then its values.
  std::vector<const uint8_t*> kptr, vptr;
  std::vector<float> rot;  // [n_blocks][d] cos/sin per block, shared by every lane
  LaneArena(KvFormat f, int d, int ctx, bool hot = false) : n_blocks(static_cast<size_t>(ctx) / kG) {
    const size_t kb = KeyBlockBytes(f, d), vb = ValueBlockBytes(f, d);
    lane_bytes = n_blocks * (kb + vb);
    lanes = hot ? 1 : (256 * kMiB) / lane_bytes + 2;
    arena = AlignedBuffer::AllocateStreamed(nullptr, lanes * lane_bytes, "bench lanes").value();  // as the KV arena
    const BlockPool pool(f, d);
    kptr.resize(lanes * n_blocks);
    vptr.resize(lanes * n_blocks);
    for (size_t l = 0; l < lanes; ++l) {
      uint8_t* lane = arena.data() + l * lane_bytes;
      for (size_t b = 0; b < n_blocks; ++b) {
        uint8_t* kp = lane + b * kb;
        uint8_t* vp = lane + n_blocks * kb + b * vb;
        std::memcpy(kp, pool.keys[(l + b) % pool.keys.size()].data(), kb);
        std::memcpy(vp, pool.values[(l + 3 * b) % pool.values.size()].data(), vb);
        kptr[l * n_blocks + b] = kp;
        vptr[l * n_blocks + b] = vp;
      }
    }
    rot.resize(n_blocks * d);
    for (size_t b = 0; b < n_blocks; ++b) {
      RopeAngles(10000.0, d, static_cast<int64_t>((n_blocks - b) * kG), rot.data() + b * d);
    }
  }
};

std::vector<float> GaussianQueries(size_t n) {
  std::vector<float> q(n);
  std::mt19937 rng(2);
  std::normal_distribution<float> n01(0.0f, 1.0f);
  for (float& x : q) x = n01(rng);
  return q;
}

// One query head attending over a lane of ctx tokens, cycling over the lanes.
void BM_DecodeAttention(benchmark::State& state, KvFormat f, int d, int ctx) {
  const LaneArena a(f, d, ctx);
  const size_t n_blocks = a.n_blocks;
  const std::vector<float> q = GaussianQueries(d);
  std::vector<float> scores(n_blocks * kG), out(d);
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  size_t lane = 0;
  for (auto _ : state) {
    ScoreKeyBlocks(f, d, d, q.data(), a.rot.data(), a.kptr.data() + lane * n_blocks, n_blocks, scale, scores.data());
    SoftmaxInPlace(scores.data(), scores.size());
    AccumulateValueBlocks(f, d, scores.data(), a.vptr.data() + lane * n_blocks, n_blocks, out.data());
    benchmark::DoNotOptimize(out.data());
    lane = lane + 1 == a.lanes ? 0 : lane + 1;
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * a.lane_bytes));
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * ctx);
  state.counters["lanes"] = static_cast<double>(a.lanes);
}

// nq query heads of one GQA group attending over the same lane. multi: the
// multi-query kernels (one pass over the lane); otherwise nq single-query
// calls in a row, as AttendLane did (the later passes may hit L2/L3).
// bytes = the lane's KV bytes (read once), items = query-tokens attended.
void BM_DecodeAttentionGqa(benchmark::State& state, KvFormat f, int d, int ctx, int nq, bool multi) {
  const LaneArena a(f, d, ctx);
  const size_t n_blocks = a.n_blocks;
  const size_t n = static_cast<size_t>(nq);
  const size_t row = n_blocks * kG;
  const std::vector<float> q = GaussianQueries(n * d);
  std::vector<float> scores(n * row), out(n * d);
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  size_t lane = 0;
  for (auto _ : state) {
    const uint8_t* const* kp = a.kptr.data() + lane * n_blocks;
    const uint8_t* const* vp = a.vptr.data() + lane * n_blocks;
    if (multi) {
      ScoreKeyBlocksMulti(f, d, d, q.data(), n, a.rot.data(), kp, n_blocks, scale, scores.data(), row);
      for (size_t i = 0; i < n; ++i) SoftmaxInPlace(scores.data() + i * row, row);
      AccumulateValueBlocksMulti(f, d, scores.data(), row, n, vp, n_blocks, out.data());
    } else {
      for (size_t i = 0; i < n; ++i) {
        float* si = scores.data() + i * row;
        ScoreKeyBlocks(f, d, d, q.data() + i * d, a.rot.data(), kp, n_blocks, scale, si);
        SoftmaxInPlace(si, row);
        AccumulateValueBlocks(f, d, si, vp, n_blocks, out.data() + i * d);
      }
    }
    benchmark::DoNotOptimize(out.data());
    lane = lane + 1 == a.lanes ? 0 : lane + 1;
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * a.lane_bytes));
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * ctx * nq);
  state.counters["lanes"] = static_cast<double>(a.lanes);
}

// One part of BM_DecodeAttentionGqa's multi path alone, to see where GQA
// attention time goes: part 0 scores (ScoreKeyBlocksMulti over the keys),
// 1 softmax (nq rows), 2 values (AccumulateValueBlocksMulti over the values,
// weights from a real softmax). bytes = the part's KV bytes, items =
// query-tokens. hot: one lane, in cache (the arithmetic without DRAM).
void BM_AttentionPartGqa(benchmark::State& state, KvFormat f, int d, int ctx, int nq, int part, bool hot) {
  const LaneArena a(f, d, ctx, hot);
  const size_t n_blocks = a.n_blocks;
  const size_t n = static_cast<size_t>(nq);
  const size_t row = n_blocks * kG;
  const std::vector<float> q = GaussianQueries(n * d);
  std::vector<float> scores(n * row), work(n * row), out(n * d);
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  ScoreKeyBlocksMulti(f, d, d, q.data(), n, a.rot.data(), a.kptr.data(), n_blocks, scale, scores.data(), row);
  for (size_t i = 0; i < n; ++i) SoftmaxInPlace(scores.data() + i * row, row);
  size_t lane = 0;
  for (auto _ : state) {
    if (part == 0) {
      ScoreKeyBlocksMulti(f, d, d, q.data(), n, a.rot.data(), a.kptr.data() + lane * n_blocks, n_blocks, scale,
                          work.data(), row);
      benchmark::DoNotOptimize(work.data());
    } else if (part == 1) {
      state.PauseTiming();
      std::memcpy(work.data(), scores.data(), work.size() * sizeof(float));
      state.ResumeTiming();
      for (size_t i = 0; i < n; ++i) SoftmaxInPlace(work.data() + i * row, row);
      benchmark::DoNotOptimize(work.data());
    } else {
      AccumulateValueBlocksMulti(f, d, scores.data(), row, n, a.vptr.data() + lane * n_blocks, n_blocks, out.data());
      benchmark::DoNotOptimize(out.data());
    }
    lane = lane + 1 == a.lanes ? 0 : lane + 1;
  }
  const size_t bytes = part == 0 ? n_blocks * KeyBlockBytes(f, d) : part == 2 ? n_blocks * ValueBlockBytes(f, d) : 0;
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bytes));
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * ctx * nq);
}

// Sealing one key block and one value block from f32 (hot in cache).
void BM_Quantize(benchmark::State& state, KvFormat f, int d) {
  std::mt19937 rng(3);
  std::normal_distribution<float> n01(0.0f, 1.0f);
  std::vector<float> k(static_cast<size_t>(d) * kG), v(k.size());
  for (float& x : k) x = n01(rng);
  for (float& x : v) x = n01(rng);
  std::vector<uint8_t> kb(KeyBlockBytes(f, d)), vb(ValueBlockBytes(f, d));
  for (auto _ : state) {
    EncodeKeyBlock(f, d, k.data(), kb.data());
    EncodeValueBlock(f, d, v.data(), vb.data());
    benchmark::DoNotOptimize(kb.data());
    benchmark::DoNotOptimize(vb.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * 2 * k.size() * sizeof(float)));
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * kG);
}

bool RegisterKvBenchmarks() {
  benchmark::RegisterBenchmark("MemoryRead", BM_MemoryRead, 1, false)->Unit(benchmark::kMillisecond)->UseRealTime();
  benchmark::RegisterBenchmark("MemoryRead/threads:2", BM_MemoryRead, 2, false)
      ->Unit(benchmark::kMillisecond)
      ->UseRealTime();
  benchmark::RegisterBenchmark("MemoryRead/pages", BM_MemoryRead, 1, true)->Unit(benchmark::kMillisecond)->UseRealTime();
  const KvFormat formats[] = {KvFormat::kF32, KvFormat::kF16, KvFormat::kInt8, KvFormat::kInt4};
  for (int d : {64, 128}) {
    for (int ctx : {4096, 32768}) {
      for (KvFormat f : formats) {
        const std::string name = std::string("DecodeAttention/") + KvFormatName(f) + "/hd" + std::to_string(d) +
                                 "/ctx" + std::to_string(ctx);
        benchmark::RegisterBenchmark(name.c_str(), BM_DecodeAttention, f, d, ctx)
            ->Unit(benchmark::kMicrosecond)
            ->UseRealTime();
      }
    }
  }
  // Head sizes whose value groups straddle tokens (48, 80: quantized values
  // decoded per block) beside a regular one (96).
  for (int d : {48, 80, 96}) {
    for (KvFormat f : formats) {
      const std::string name = std::string("DecodeAttention/") + KvFormatName(f) + "/hd" + std::to_string(d) + "/ctx4096";
      benchmark::RegisterBenchmark(name.c_str(), BM_DecodeAttention, f, d, 4096)->Unit(benchmark::kMicrosecond)->UseRealTime();
      const std::string gqa = std::string("DecodeAttentionGqa/") + KvFormatName(f) + "/hd" + std::to_string(d) +
                              "/ctx4096/q4";
      benchmark::RegisterBenchmark(gqa.c_str(), BM_DecodeAttentionGqa, f, d, 4096, 4, true)
          ->Unit(benchmark::kMicrosecond)
          ->UseRealTime();
    }
  }
  // TinyLlama-1.1B's shape: 8 query heads per kv head, hd64; by part. ctx512
  // is the batched-decode depth of issue 16, where per-block costs dominate.
  for (KvFormat f : formats) {
    for (int ctx : {512, 16384}) {
      for (int part = 0; part < 3; ++part) {
        for (bool hot : {false, true}) {
          if (hot && part == 1) continue;  // softmax reads no KV
          static const char* const kPart[] = {"scores", "softmax", "values"};
          const std::string name = std::string("AttentionPartGqa/") + KvFormatName(f) + "/hd64/ctx" +
                                   std::to_string(ctx) + "/q8/" + kPart[part] + (hot ? "/hot" : "");
          benchmark::RegisterBenchmark(name.c_str(), BM_AttentionPartGqa, f, 64, ctx, 8, part, hot)
              ->Unit(benchmark::kMicrosecond)
              ->UseRealTime();
        }
      }
    }
    const std::string name = std::string("DecodeAttentionGqa/") + KvFormatName(f) + "/hd64/ctx16384/q8";
    benchmark::RegisterBenchmark(name.c_str(), BM_DecodeAttentionGqa, f, 64, 16384, 8, true)
        ->Unit(benchmark::kMicrosecond)
        ->UseRealTime();
  }
  // GQA groups (Llama-2/3: 4 query heads per kv head; TinyLlama: 8), hd128.
  for (int ctx : {4096, 32768}) {
    for (KvFormat f : formats) {
      for (int nq : {4, 8}) {
        for (bool multi : {true, false}) {
          const std::string name = std::string("DecodeAttentionGqa/") + KvFormatName(f) + "/hd128/ctx" +
                                   std::to_string(ctx) + "/q" + std::to_string(nq) + (multi ? "" : "/loop");
          benchmark::RegisterBenchmark(name.c_str(), BM_DecodeAttentionGqa, f, 128, ctx, nq, multi)
              ->Unit(benchmark::kMicrosecond)
              ->UseRealTime();
        }
      }
    }
  }
  for (KvFormat f : formats) {
    for (int d : {64, 128}) {
      const std::string name = std::string("Quantize/") + KvFormatName(f) + "/hd" + std::to_string(d);
      benchmark::RegisterBenchmark(name.c_str(), BM_Quantize, f, d);
    }
  }
  return true;
}

const bool kKvBenchmarksRegistered = RegisterKvBenchmarks();

}  // namespace
}  // namespace kvedge
