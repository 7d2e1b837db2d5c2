// ThreadArena: a oneTBB task_arena of exactly N threads (the caller plus N-1
// workers) running pre-partitioned ranges. Idle workers sleep in TBB.
#ifndef KVEDGE_PLATFORM_THREAD_ARENA_H_
#define KVEDGE_PLATFORM_THREAD_ARENA_H_

#include <cstddef>
#include <memory>

#include "platform/function_ref.h"
#include "platform/status.h"

namespace kvedge {

inline constexpr int kMaxThreads = 256;

// Owner of the arena; move-only through unique_ptr. ParallelFor may be called
// from one thread at a time per arena (sessions each own one, or share one
// under their own lock).
class ThreadArena {
 public:
  // 1 ≤ num_threads ≤ kMaxThreads, else kInvalidArgument.
  static StatusOr<std::unique_ptr<ThreadArena>> Create(int num_threads);
  ~ThreadArena();
  ThreadArena(const ThreadArena&) = delete;
  ThreadArena& operator=(const ThreadArena&) = delete;

  int num_threads() const { return num_threads_; }

  // Splits [0, num_items) into num_threads() contiguous ranges, statically
  // assigned, and calls fn(begin, end, thread) once per non-empty range;
  // `thread` < num_threads() indexes per-thread scratch. Blocks until all
  // ranges are done. With one thread, runs inline on the caller.
  void ParallelFor(size_t num_items, FunctionRef<void(size_t begin, size_t end, int thread)> fn);

  // Calls fn(task, thread) for each task in [0, num_tasks), tasks distributed
  // dynamically (for uneven work such as lanes of different lengths).
  void ParallelForEach(size_t num_tasks, FunctionRef<void(size_t task, int thread)> fn);

 private:
  struct Impl;
  explicit ThreadArena(int num_threads);

  int num_threads_;
  std::unique_ptr<Impl> impl_;
};

// Hardware threads available to this process.
int HardwareThreads();

}  // namespace kvedge

#endif  // KVEDGE_PLATFORM_THREAD_ARENA_H_
