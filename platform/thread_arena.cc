// ThreadArena over oneTBB; under ThreadSanitizer over a plain std::thread
// fork-join pool, because Debian's libtbb is not instrumented and TSan cannot
// see its synchronisation (every task hand-off would be reported). The pool
// keeps the same contract (static ranges, thread indices, exactly N threads),
// so the TSan stage checks kvedge's own partitioned code for races.
#include "platform/thread_arena.h"

#include <oneapi/tbb/blocked_range.h>
#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/parallel_for.h>
#include <oneapi/tbb/partitioner.h>
#include <oneapi/tbb/task_arena.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace kvedge {


#if defined(KVEDGE_TSAN)
// N−1 workers sleep on a condition variable; a job is published under the
// mutex with a generation number, part p runs on thread p (caller = 0).
struct ThreadArena::Impl {
  explicit Impl(int n) : num_threads(n) {
    for (int t = 1; t < n; ++t) workers.emplace_back([this, t] { WorkerLoop(t); });
  }
  ~Impl() {
    {
      std::lock_guard<std::mutex> lock(mu);
      stop = true;
    }
    cv.notify_all();
    for (auto& w : workers) w.join();
  }
  void Initialize() {}

  // Runs part(p, thread) for p in [0, parts) with thread == p, or, when
  // dynamic, every thread pulls parts from a shared counter.
  void Run(size_t parts, bool dynamic, FunctionRef<void(size_t, int)> part) {
    std::unique_lock<std::mutex> lock(mu);
    job = &part;
    job_parts = parts;
    job_dynamic = dynamic;
    next_part.store(0);
    pending = num_threads - 1;
    ++generation;
    lock.unlock();
    cv.notify_all();
    Work(0);
    lock.lock();
    done_cv.wait(lock, [this] { return pending == 0; });
    job = nullptr;
  }

  void Work(int thread) {
    if (job_dynamic) {
      for (size_t p = next_part.fetch_add(1); p < job_parts; p = next_part.fetch_add(1)) (*job)(p, thread);
    } else if (static_cast<size_t>(thread) < job_parts) {
      (*job)(static_cast<size_t>(thread), thread);
    }
  }

  void WorkerLoop(int thread) {
    uint64_t seen = 0;
    std::unique_lock<std::mutex> lock(mu);
    for (;;) {
      cv.wait(lock, [&] { return stop || generation != seen; });
      if (stop) return;
      seen = generation;
      lock.unlock();
      Work(thread);
      lock.lock();
      if (--pending == 0) done_cv.notify_one();
    }
  }

  int num_threads;
  std::vector<std::thread> workers;
  std::mutex mu;
  std::condition_variable cv, done_cv;
  bool stop = false;
  uint64_t generation = 0;
  int pending = 0;
  const FunctionRef<void(size_t, int)>* job = nullptr;
  size_t job_parts = 0;
  bool job_dynamic = false;
  std::atomic<size_t> next_part{0};
};
#else
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
  explicit Impl(int n) : arena(n, /*reserved_for_masters=*/1) { EnsureParallelismAtLeast(n); }
  void Initialize() { arena.initialize(); }

  void Run(size_t parts, bool dynamic, FunctionRef<void(size_t, int)> part) {
    arena.execute([&] {
      const auto body = [&](const tbb::blocked_range<size_t>& r) {
        const int thread = tbb::this_task_arena::current_thread_index();
        for (size_t p = r.begin(); p != r.end(); ++p) part(p, thread);
      };
      if (dynamic) {
        tbb::parallel_for(tbb::blocked_range<size_t>(0, parts, 1), body, tbb::simple_partitioner());
      } else {
        tbb::parallel_for(tbb::blocked_range<size_t>(0, parts, 1), body, tbb::static_partitioner());
      }
    });
  }

  tbb::task_arena arena;
};
#endif

ThreadArena::ThreadArena(int num_threads) : num_threads_(num_threads) {
  if (num_threads > 1) {
    impl_ = std::make_unique<Impl>(num_threads);
    impl_->Initialize();
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
  impl_->Run(parts, /*dynamic=*/false, [&](size_t p, int thread) {
    const size_t begin = num_items * p / parts;
    const size_t end = num_items * (p + 1) / parts;
    if (begin < end) fn(begin, end, thread);
  });
}

void ThreadArena::ParallelForEach(size_t num_tasks, FunctionRef<void(size_t, int)> fn) {
  if (num_tasks == 0) return;
  if (num_threads_ == 1 || !impl_ || num_tasks == 1) {
    for (size_t t = 0; t < num_tasks; ++t) fn(t, 0);
    return;
  }
  impl_->Run(num_tasks, /*dynamic=*/true, fn);
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
