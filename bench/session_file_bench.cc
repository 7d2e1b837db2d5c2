// Session file save/load throughput for a 64 MiB KV arena of a realistic
// attention shape (8 layers × 4 kv heads × head_dim 128, random weights): the
// arena filled to 1/8, 1/2 and all of its capacity, and after a stream 20×
// the capacity. Bytes/s counts the file's bytes; a save includes the fsync
// of the file and of its directory. Cost follows the bytes held, not the
// stream's length. Files go to $TMPDIR (default /tmp).
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "runtime/chat/session_file.h"
#include "runtime/engine/sampler.h"
#include "runtime/engine/session.h"
#include "runtime/model/model_export.h"
#include "runtime/model/model_loader.h"

namespace kvedge {
namespace {

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TMPDIR");
  return std::string(dir != nullptr && dir[0] != '\0' ? dir : "/tmp") + "/kvedge_bench_session_" +
         std::to_string(::getpid()) + "_" + name;
}

const ModelWeights& Model() {
  static const ModelWeights* m = [] {
    const SynthShape shape{"session-bench", 512, 8, 4, 4, 256, 512, 4096};
    const std::string path = TempPath("model.gguf");
    KVEDGE_CHECK(WriteRandomLlamaGguf(shape, WeightType::kQ8_0, 1, path).ok());
    auto w = LoadModel(path);
    KVEDGE_CHECK(w.ok());
    std::filesystem::remove(path);  // the mapping stays valid
    return std::move(w).value().release();
  }();
  return *m;
}

SessionOptions Options() {
  SessionOptions o;
  o.kv.policy = EvictionPolicy::kSinks;
  o.kv.key_format = KvFormat::kInt4;
  o.kv.value_format = KvFormat::kInt4;
  o.kv.budget_bytes = uint64_t{64} << 20;
  return o;
}

// range(0): tokens streamed, in eighths of the cache capacity.
std::unique_ptr<Session> Filled(int64_t eighths) {
  auto s = Session::Create(Model(), Options());
  KVEDGE_CHECK(s.ok());
  const int64_t tokens = (*s)->cache().plan().capacity * eighths / 8;
  KVEDGE_CHECK((*s)->FillSynthetic(static_cast<size_t>(tokens), 1).ok());
  const int t = 5;
  KVEDGE_CHECK((*s)->Feed(&t, 1).ok());
  return std::move(s).value();
}

void Report(benchmark::State& state, const Session& s, const std::string& path) {
  const uint64_t bytes = std::filesystem::file_size(path);
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bytes));
  state.counters["file_MiB"] = static_cast<double>(bytes) / (1 << 20);
  state.counters["arena_MiB"] = static_cast<double>(s.cache().Stats().arena_bytes) / (1 << 20);
  state.counters["tokens_seen"] = static_cast<double>(s.tokens_fed());
}

void BM_SaveSession(benchmark::State& state) {
  const std::unique_ptr<Session> s = Filled(state.range(0));
  const std::string path = TempPath("save.kvs");
  for (auto _ : state) KVEDGE_CHECK(SaveSession(*s, nullptr, path).ok());
  Report(state, *s, path);
  std::filesystem::remove(path);
}

void BM_LoadSession(benchmark::State& state) {
  const std::unique_ptr<Session> s = Filled(state.range(0));
  const std::string path = TempPath("load.kvs");
  KVEDGE_CHECK(SaveSession(*s, nullptr, path).ok());
  auto target = Session::Create(Model(), Options());
  KVEDGE_CHECK(target.ok());
  for (auto _ : state) KVEDGE_CHECK(LoadSession(path, target->get(), nullptr).ok());
  Report(state, *s, path);
  std::filesystem::remove(path);
}

BENCHMARK(BM_SaveSession)->Arg(1)->Arg(4)->Arg(8)->Arg(160)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_LoadSession)->Arg(1)->Arg(4)->Arg(8)->Arg(160)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace kvedge
