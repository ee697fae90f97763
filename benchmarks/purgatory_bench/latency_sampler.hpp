// Kafka's LogNormalDistribution: the completion latency each request draws.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>

namespace purgatory_bench {

// The median and the 75th percentile fix mu and sigma.
class LatencySampler {
 public:
  LatencySampler(double pct50, double pct75, std::uint64_t seed)
      : mu_(std::log(pct50)), sigma_((std::log(pct75) - mu_) / 0.674489750196), rng_(seed) {}
  double next_ms() { return std::exp(mu_ + sigma_ * normal_(rng_)); }

 private:
  double mu_;
  double sigma_;
  std::mt19937_64 rng_;
  std::normal_distribution<double> normal_{0.0, 1.0};
};

}  // namespace purgatory_bench
