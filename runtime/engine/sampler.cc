// Sampling: argmax, or softmax(logits/T) cut by top-k then top-p.
#include "runtime/engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <sstream>

namespace kvedge {

StatusOr<Sampler> Sampler::Create(const SamplerOptions& o, int vocab_size) {
  if (!(o.temperature >= 0.0f) || !std::isfinite(o.temperature)) {
    return InvalidArgument("temperature must be a finite number ≥ 0 (0 = greedy), got " + std::to_string(o.temperature));
  }
  if (!(o.top_p > 0.0f && o.top_p <= 1.0f)) {
    return InvalidArgument("top-p must be in (0, 1], got " + std::to_string(o.top_p));
  }
  if (vocab_size < 1) return InvalidArgument("sampler: empty vocabulary");
  return Sampler(o, vocab_size);
}

Sampler::Sampler(const SamplerOptions& o, int vocab_size)
    : options_(o), rng_(o.seed), order_(static_cast<size_t>(vocab_size)), probs_(static_cast<size_t>(vocab_size)) {}

int Sampler::Sample(const float* logits) {
  const int n = static_cast<int>(order_.size());
  if (options_.temperature == 0.0f) {
    return static_cast<int>(std::max_element(logits, logits + n) - logits);  // first maximum
  }
  std::iota(order_.begin(), order_.end(), 0);
  int k = options_.top_k > 0 ? std::min(options_.top_k, n) : n;
  const auto by_logit = [logits](int a, int b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); };
  if (k < n) {
    std::nth_element(order_.begin(), order_.begin() + k, order_.end(), by_logit);
  }
  std::sort(order_.begin(), order_.begin() + k, by_logit);
  const float inv_t = 1.0f / options_.temperature;
  const float mx = logits[order_[0]];
  double sum = 0;
  for (int i = 0; i < k; ++i) sum += (probs_[i] = std::exp((logits[order_[i]] - mx) * inv_t));
  // Nucleus: the smallest prefix whose mass reaches top_p.
  if (options_.top_p < 1.0f) {
    double acc = 0;
    for (int i = 0; i < k; ++i) {
      acc += probs_[i] / sum;
      if (acc >= options_.top_p) {
        k = i + 1;
        break;
      }
    }
    sum = 0;
    for (int i = 0; i < k; ++i) sum += probs_[i];
  }
  const double r = std::uniform_real_distribution<double>(0.0, sum)(rng_);
  double acc = 0;
  for (int i = 0; i < k; ++i) {
    acc += probs_[i];
    if (r < acc) return order_[i];
  }
  return order_[k - 1];
}

std::string Sampler::RngState() const {
  std::ostringstream out;
  out << rng_;
  return out.str();
}

Status Sampler::SetRngState(std::string_view state) {
  std::istringstream in{std::string(state)};
  std::mt19937_64 rng;
  in >> rng;
  if (in.fail() || !(in >> std::ws).eof()) return DataLoss("sampler state is not a 64-bit Mersenne Twister state");
  rng_ = rng;
  return OkStatus();
}

}  // namespace kvedge
