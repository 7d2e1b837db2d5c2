// ThreadArena over oneTBB.
#include "platform/thread_arena.h"

#include <oneapi/tbb/blocked_range.h>
#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/parallel_for.h>
#include <oneapi/tbb/partitioner.h>
#include <oneapi/tbb/task_arena.h>
#include <sched.h>

#include <algorithm>
#include <mutex>
#include <string>
#include <thread>

namespace kvedge {

namespace {
// TBB caps its worker pool at the hardware thread count; an arena asking for
// more (oversubscription, on purpose) needs the process-wide cap raised. The
// cap only grows, and is kept for the life of the process.
void EnsureParallelismAtLeast(int n) {
  static std::mutex mu;
  static std::unique_ptr<tbb::global_control> control;
  static int current = 0;
  std::lock_guard<std::mutex> lock(mu);
  const int want = std::max(n, HardwareThreads());
  if (want <= current) return;
  control.reset();
  control = std::make_unique<tbb::global_control>(tbb::global_control::max_allowed_parallelism,
                                                  static_cast<size_t>(want));
  current = want;
}
}  // namespace

struct ThreadArena::Impl {
  explicit Impl(int n) : arena(n, /*reserved_for_masters=*/1) {}
  tbb::task_arena arena;
};

ThreadArena::ThreadArena(int num_threads) : num_threads_(num_threads) {
  if (num_threads > 1) {
    EnsureParallelismAtLeast(num_threads);
    impl_ = std::make_unique<Impl>(num_threads);
    impl_->arena.initialize();
  }
}

ThreadArena::~ThreadArena() = default;

StatusOr<std::unique_ptr<ThreadArena>> ThreadArena::Create(int num_threads) {
  if (num_threads < 1 || num_threads > kMaxThreads) {
    return InvalidArgument("thread count " + std::to_string(num_threads) + " is out of range: expected 1 to " +
                           std::to_string(kMaxThreads) + " (this machine has " +
                           std::to_string(HardwareThreads()) + " hardware threads)");
  }
  return std::unique_ptr<ThreadArena>(new ThreadArena(num_threads));
}

void ThreadArena::ParallelFor(size_t num_items, FunctionRef<void(size_t, size_t, int)> fn) {
  if (num_items == 0) return;
  const size_t parts = std::min<size_t>(static_cast<size_t>(num_threads_), num_items);
  if (parts == 1 || !impl_) {
    fn(0, num_items, 0);
    return;
  }
  impl_->arena.execute([&] {
    tbb::parallel_for(
        tbb::blocked_range<size_t>(0, parts, 1),
        [&](const tbb::blocked_range<size_t>& r) {
          const int thread = tbb::this_task_arena::current_thread_index();
          for (size_t p = r.begin(); p != r.end(); ++p) {
            const size_t begin = num_items * p / parts;
            const size_t end = num_items * (p + 1) / parts;
            if (begin < end) fn(begin, end, thread);
          }
        },
        tbb::static_partitioner());
  });
}

void ThreadArena::ParallelForEach(size_t num_tasks, FunctionRef<void(size_t, int)> fn) {
  if (num_tasks == 0) return;
  if (num_threads_ == 1 || !impl_ || num_tasks == 1) {
    for (size_t t = 0; t < num_tasks; ++t) fn(t, 0);
    return;
  }
  impl_->arena.execute([&] {
    tbb::parallel_for(
        tbb::blocked_range<size_t>(0, num_tasks, 1),
        [&](const tbb::blocked_range<size_t>& r) {
          const int thread = tbb::this_task_arena::current_thread_index();
          for (size_t t = r.begin(); t != r.end(); ++t) fn(t, thread);
        },
        tbb::simple_partitioner());
  });
}

int HardwareThreads() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    const int n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
  const unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}

}  // namespace kvedge
