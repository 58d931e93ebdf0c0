// The CPU's half of the CUDA backend's staged copies (exec/cuda/
// parallel_copy.hpp): a memcpy split across a pool's threads. Host-only, so
// it runs on every machine, GPU or not.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "exec/cuda/parallel_copy.hpp"

namespace genie::cuda {
namespace {

std::vector<unsigned char> random_bytes(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<unsigned char> v(n);
  for (unsigned char& b : v) b = static_cast<unsigned char>(rng());
  return v;
}

// Copies n bytes through `par` into a buffer with poisoned guard bytes
// after it; checks every byte and the guard.
void check_copy(const Parallel& par, size_t n, unsigned seed) {
  constexpr size_t kGuard = 256;
  const std::vector<unsigned char> src = random_bytes(n, seed);
  std::vector<unsigned char> dst(n + kGuard, 0xab);
  parallel_memcpy(par, dst.data(), src.data(), n);
  ASSERT_TRUE(std::equal(src.begin(), src.end(), dst.begin())) << n << " bytes";
  for (size_t i = n; i < n + kGuard; ++i) ASSERT_EQ(dst[i], 0xab) << "byte " << i << " past " << n;
}

TEST(CudaParallelCopy, CopiesEveryByteOfAnySize) {
  // Sizes that do and do not divide into whole cache-line slices.
  const size_t sizes[] = {
      0, 1, 63, 64, 65, 255, 4099, (size_t{1} << 20) + 3, size_t{4} << 20, (size_t{4} << 20) - 1};
  for (int threads : {1, 2, 4, 8}) {
    ThreadPool pool(threads);
    const Parallel par(&pool);
    unsigned seed = 1;
    for (size_t n : sizes) {
      SCOPED_TRACE(testing::Message() << threads << " threads");
      check_copy(par, n, seed++);
    }
    if (threads > 1) EXPECT_GT(par.stats().splits, 0u) << "no copy was split over the pool";
  }
}

TEST(CudaParallelCopy, CallersAtOnceEachGetTheirBytes) {
  ThreadPool pool(4);
  const Parallel par(&pool);
  std::vector<std::thread> callers;
  std::vector<int> failures(4, 0);
  for (int t = 0; t < 4; ++t)
    callers.emplace_back([&, t] {
      for (int i = 0; i < 20; ++i) {
        const size_t n = (size_t{1} << 20) + static_cast<size_t>(t * 1000 + i);
        const std::vector<unsigned char> src = random_bytes(n, static_cast<unsigned>(t * 100 + i));
        std::vector<unsigned char> dst(n, 0);
        parallel_memcpy(par, dst.data(), src.data(), n);
        if (dst != src) ++failures[static_cast<size_t>(t)];
      }
    });
  for (std::thread& c : callers) c.join();
  for (int f : failures) EXPECT_EQ(f, 0);
}

TEST(CudaParallelCopy, TheProcessCopyMatchesMemcpy) {
  for (size_t n : {size_t{0}, size_t{100}, 2 * kCopyGrain - 1, 2 * kCopyGrain, (size_t{3} << 20) + 17}) {
    const std::vector<unsigned char> src = random_bytes(n, static_cast<unsigned>(n));
    std::vector<unsigned char> dst(n, 0);
    parallel_memcpy(dst.data(), src.data(), n);
    EXPECT_EQ(dst, src) << n << " bytes";
  }
}

TEST(CudaParallelCopy, ThreadCountFromTheEnvironment) {
  const char* saved = std::getenv("GENIE_CUDA_COPY_THREADS");
  const std::string keep = saved ? saved : "";
  // Unset or invalid: 4, or the CPUs there are where they are fewer.
  const unsigned cpus = std::thread::hardware_concurrency();
  const int dflt = cpus == 0 ? 4 : static_cast<int>(std::min(4u, cpus));
  EXPECT_EQ(default_copy_threads(), dflt);
  const std::pair<const char*, int> cases[] = {{"", dflt},    {"1", 1},     {"8", 8},
                                               {"64", 64},    {"0", dflt},  {"-2", dflt},
                                               {"abc", dflt}, {"3x", dflt}, {"1000", 64}};
  for (const auto& [value, want] : cases) {
    setenv("GENIE_CUDA_COPY_THREADS", value, 1);
    EXPECT_EQ(copy_threads(), want) << "GENIE_CUDA_COPY_THREADS='" << value << "'";
  }
  unsetenv("GENIE_CUDA_COPY_THREADS");
  EXPECT_EQ(copy_threads(), dflt);
  if (saved) setenv("GENIE_CUDA_COPY_THREADS", keep.c_str(), 1);
}

}  // namespace
}  // namespace genie::cuda
