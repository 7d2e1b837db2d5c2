// The Llama forward pass over a Session's KV arena.
#include "runtime/engine/session.h"

#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include "simd/model_kernels.h"
#include "simd/model_kernels_ref.h"

namespace kvedge {

KvShape KvShapeOf(const ModelConfig& c) {
  KvShape s;
  s.n_layers = c.n_layers;
  s.n_heads = c.n_heads;
  s.n_kv_heads = c.n_kv_heads;
  s.head_dim = c.head_dim;
  s.rope_dim = c.rope_dim;
  s.rope_theta = static_cast<double>(c.rope_theta);
  s.rope_style = c.rope_style;
  s.rope_mscale = RopeMagnitude(c);
  s.attn_scale = c.attn_scale;
  s.attn_softcap = c.attn_softcap;
  s.sliding_window = c.sliding_window;
  s.swa_period = c.swa_period;
  return s;
}

StatusOr<ForwardScratch> ForwardScratch::Allocate(const ModelConfig& c, size_t rows, MemoryBudget* budget) {
  const size_t qdim = static_cast<size_t>(c.n_heads) * c.head_dim;
  const size_t kvdim = static_cast<size_t>(c.n_kv_heads) * c.head_dim;
  const size_t widths[] = {static_cast<size_t>(c.dim), static_cast<size_t>(c.dim), qdim, kvdim, kvdim, qdim,
                           static_cast<size_t>(c.dim), static_cast<size_t>(c.hidden_dim),
                           static_cast<size_t>(c.hidden_dim), static_cast<size_t>(c.vocab_size)};
  size_t total = 0;
  for (size_t w : widths) total += RoundUp(rows * w * sizeof(float), kAlignment);
  ForwardScratch s;
  KVEDGE_ASSIGN_OR_RETURN(s.buffer, budget != nullptr ? AlignedBuffer::Allocate(*budget, total, "forward scratch")
                                                      : AlignedBuffer::Allocate(total, "forward scratch"));
  s.rows = rows;
  float** views[] = {&s.x, &s.xb, &s.q, &s.k, &s.v, &s.att, &s.proj, &s.h1, &s.h3, &s.logits};
  uint8_t* p = s.buffer.data();
  for (size_t i = 0; i < std::size(widths); ++i) {
    *views[i] = reinterpret_cast<float*>(p);
    p += RoundUp(rows * widths[i] * sizeof(float), kAlignment);
  }
  return s;
}

Session::Session(const ModelWeights& model, const SessionOptions& options) : model_(model), options_(options) {}
Session::~Session() = default;

StatusOr<std::unique_ptr<Session>> Session::Create(const ModelWeights& model, const SessionOptions& options,
                                                   MemoryBudget* budget) {
  if (options.max_batch < 1 || options.max_batch > kMaxBatch) {
    return InvalidArgument("batch size " + std::to_string(options.max_batch) + " is out of range (1 to " +
                           std::to_string(kMaxBatch) + ")");
  }
  if (options.history_tokens < 0 || options.history_tokens > kMaxContext) {
    return InvalidArgument("token history of " + std::to_string(options.history_tokens) +
                           " ids is out of range (0 to " + std::to_string(kMaxContext) + ")");
  }
  KVEDGE_ASSIGN_OR_RETURN(std::unique_ptr<ThreadArena> threads, ThreadArena::Create(options.threads));
  KVEDGE_ASSIGN_OR_RETURN(KvCachePlan plan, PlanKvCache(KvShapeOf(model.config), options.kv, options.threads));
  // The RoPE frequencies may depend on the context the cache spans (phi3's
  // long/short factors).
  KVEDGE_RETURN_IF_ERROR(plan.SetRopeFrequencies(RopeFrequencies(model, plan.capacity)));
  std::unique_ptr<Session> s(new Session(model, options));
  KVEDGE_ASSIGN_OR_RETURN(s->cache_, KvCache::Create(plan, budget));
  s->threads_ = std::move(threads);

  KVEDGE_ASSIGN_OR_RETURN(s->scratch_,
                          ForwardScratch::Allocate(model.config, static_cast<size_t>(options.max_batch), budget));
  s->last_logits_ = s->scratch_.logits;
  s->history_ = TokenHistory(static_cast<size_t>(options.history_tokens));
  return s;
}

void Session::RestoreStream(uint64_t tokens_fed, const float* logits) {
  tokens_fed_ = tokens_fed;
  last_logits_ = scratch_.logits;
  const size_t vocab = static_cast<size_t>(model_.config.vocab_size);
  if (logits != nullptr) {
    std::memcpy(scratch_.logits, logits, vocab * sizeof(float));
  } else {
    std::fill(scratch_.logits, scratch_.logits + vocab, 0.0f);
  }
}

void Session::AdoptStep(int token, const float* logits) {
  std::memcpy(scratch_.logits, logits, static_cast<size_t>(model_.config.vocab_size) * sizeof(float));
  last_logits_ = scratch_.logits;
  tokens_fed_ += 1;
  history_.Append(&token, 1);
}

uint64_t Session::reserved_bytes() const { return cache_->Stats().arena_bytes + scratch_.buffer.size(); }

Status Session::Feed(const int* tokens, size_t n) {
  return FeedImpl(tokens, n, false, [](size_t, const float*) {});
}

Status Session::FeedAll(const int* tokens, size_t n, FunctionRef<void(size_t, const float*)> on_logits) {
  return FeedImpl(tokens, n, true, on_logits);
}

Status Session::FillSynthetic(size_t n, uint32_t seed) {
  if (n == 0) return OkStatus();
  if (n > static_cast<size_t>(INT32_MAX)) return InvalidArgument("synthetic fill of " + std::to_string(n) + " tokens is too long");
  KVEDGE_RETURN_IF_ERROR(cache_->CheckRoom(static_cast<int>(n)));
  const size_t kvdim = static_cast<size_t>(model_.config.n_kv_heads) * model_.config.head_dim;
  constexpr size_t kPool = 16;  // distinct key and value vectors, cycled
  std::vector<float> pool(2 * kPool * kvdim);  // [k|v][kPool][kv_dim]
  std::mt19937 rng(seed);
  std::normal_distribution<float> n01(0.0f, 1.0f);
  for (float& f : pool) f = n01(rng);
  for (size_t i = 0; i < n; ++i) {
    const float* k = pool.data() + (i % kPool) * kvdim;
    const float* v = pool.data() + (kPool + (i * 7 + 3) % kPool) * kvdim;
    for (int l = 0; l < model_.config.n_layers; ++l) cache_->Append(l, k, v);
    const int synthetic = TokenHistory::kSyntheticToken;
    history_.Append(&synthetic, 1);
  }
  tokens_fed_ += n;
  return OkStatus();
}

Status Session::FeedImpl(const int* tokens, size_t n, bool all, FunctionRef<void(size_t, const float*)> on_logits) {
  const int vocab = model_.config.vocab_size;
  for (size_t i = 0; i < n; ++i) {
    if (tokens[i] < 0 || tokens[i] >= vocab) {
      return InvalidArgument("token id " + std::to_string(tokens[i]) + " at position " + std::to_string(i) +
                             " is outside the vocabulary (0 to " + std::to_string(vocab - 1) + ")");
    }
  }
  const size_t max_batch = static_cast<size_t>(options_.max_batch);
  for (size_t start = 0; start < n; start += max_batch) {
    const size_t len = std::min(max_batch, n - start);
    // A `full` cache refuses before any layer changes; evicting caches always have room.
    KVEDGE_RETURN_IF_ERROR(cache_->CheckRoom(static_cast<int>(len)));
    Forward(model_, scratch_, RowCaches(cache_.get()), tokens + start, len, all, threads_.get());
    const float* logits = scratch_.logits;
    if (all) {
      for (size_t i = 0; i < len; ++i) on_logits(start + i, logits + i * vocab);
    }
    last_logits_ = all ? logits + (len - 1) * vocab : logits;
    tokens_fed_ += len;
    history_.Append(tokens + start, len);
  }
  return OkStatus();
}

// Shapes: x/xb/proj [n][dim], q/att [n][n_heads·hd], k/v [n][kv_dim],
// h1/h3 [n][hidden], logits [n or 1][vocab]; row i's token tokens[i], its
// cache caches[i]. One pass for every architecture:
// optional tensors (biases, post-norms) and config fields (embedding scale,
// activation, soft-caps) are the differences; RoPE style, frequencies,
// attention scale, soft-cap and sliding windows live in the cache.
void Forward(const ModelWeights& model, const ForwardScratch& s, RowCaches caches, const int* tokens, size_t n,
             bool all_logits, ThreadArena* t) {
  const ModelConfig& c = model.config;
  const size_t dim = static_cast<size_t>(c.dim);
  const size_t qdim = static_cast<size_t>(c.n_heads) * c.head_dim;
  const size_t kvdim = static_cast<size_t>(c.n_kv_heads) * c.head_dim;
  const size_t hidden = static_cast<size_t>(c.hidden_dim);
  const auto add_bias = [n](const float* bias, float* rows, size_t width) {
    if (bias == nullptr) return;
    for (size_t i = 0; i < n; ++i) AddInPlace(rows + i * width, bias, width);
  };
  // x += (post_norm ? RmsNorm(proj) : proj), row by row.
  const auto residual = [&](const float* post_norm) {
    for (size_t i = 0; i < n; ++i) {
      if (post_norm != nullptr) RmsNorm(s.proj + i * dim, post_norm, dim, c.rms_eps, s.proj + i * dim);
      AddInPlace(s.x + i * dim, s.proj + i * dim, dim);
    }
  };
  for (size_t i = 0; i < n; ++i) {
    float* row = s.x + i * dim;
    ref::DequantizeRow(model.token_embedding, static_cast<size_t>(tokens[i]), row);
    if (c.embedding_scale != 1.0f) {
      for (size_t j = 0; j < dim; ++j) row[j] *= c.embedding_scale;
    }
  }
  for (int l = 0; l < c.n_layers; ++l) {
    const LayerWeights& w = model.layers[static_cast<size_t>(l)];
    for (size_t i = 0; i < n; ++i) RmsNorm(s.x + i * dim, w.attn_norm, dim, c.rms_eps, s.xb + i * dim);
    MatMul(w.wq, s.xb, n, s.q, t);
    MatMul(w.wk, s.xb, n, s.k, t);
    MatMul(w.wv, s.xb, n, s.v, t);
    add_bias(w.bq, s.q, qdim);
    add_bias(w.bk, s.k, kvdim);
    add_bias(w.bv, s.v, kvdim);
    for (size_t i = 0; i < n; ++i) {
      KvCache& cache = caches[i];
      cache.Append(l, s.k + i * kvdim, s.v + i * kvdim);
      // A cache planned for fewer threads than the arena has (a batch row)
      // attends on one: the result is the same on any thread count.
      ThreadArena* at = t != nullptr && t->num_threads() <= cache.plan().max_threads ? t : nullptr;
      // The next sequence's first lane (a batch; rows of one prompt share this cache).
      if (caches.shared() == nullptr && i + 1 < n) caches[i + 1].PrefetchAttend(l);
      cache.Attend(l, s.q + i * qdim, s.att + i * qdim, at);
    }
    MatMul(w.wo, s.att, n, s.proj, t);
    residual(w.post_attn_norm);
    for (size_t i = 0; i < n; ++i) RmsNorm(s.x + i * dim, w.ffn_norm, dim, c.rms_eps, s.xb + i * dim);
    MatMul(w.w1, s.xb, n, s.h1, t);
    MatMul(w.w3, s.xb, n, s.h3, t);
    for (size_t i = 0; i < n; ++i) {
      float* g = s.h1 + i * hidden;
      if (c.ffn_activation == FfnActivation::kGeluTanh) {
        GeluTanhMul(g, s.h3 + i * hidden, hidden, g);
      } else {
        SwiGlu(g, s.h3 + i * hidden, hidden, g);
      }
    }
    MatMul(w.w2, s.h1, n, s.proj, t);
    residual(w.post_ffn_norm);
  }
  const size_t first = all_logits ? 0 : n - 1;
  const size_t m = n - first;
  for (size_t i = first; i < n; ++i) RmsNorm(s.x + i * dim, model.final_norm, dim, c.rms_eps, s.xb + (i - first) * dim);
  MatMul(model.output, s.xb, m, s.logits, t);
  if (c.final_softcap > 0.0f) {
    const size_t vocab = static_cast<size_t>(c.vocab_size);
    SoftCap(s.logits, m * vocab, c.final_softcap, s.logits);
  }
}

}  // namespace kvedge
