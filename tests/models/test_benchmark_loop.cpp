// models::back_to_back and the nccl-tests loop arithmetic (models/benchmark_loop.hpp): layout of the copies,
// the launch and flow-control dependencies, and the per-call time formula.
#include <doctest/doctest.h>

#include <algorithm>
#include <vector>

#include "models/benchmark_loop.hpp"
#include "models/collectives.hpp"
#include "models/system.hpp"
#include "sim/base/error.hpp"
#include "topologies/io.hpp"

using namespace fabricsim;
using namespace fabricsim::models;

namespace {
bool has(const std::vector<std::uint32_t>& v, std::size_t x) {
  return std::find(v.begin(), v.end(), static_cast<std::uint32_t>(x)) != v.end();
}

// A chain g0 -> g1 -> g2 on one channel, like a 3-rank ring broadcast from g0.
Schedule chain(const topo::Topology& t, std::uint32_t steps) {
  const auto& g = t.gpus();
  Schedule s;
  s.op = "broadcast";
  s.algorithm = "ring";
  s.protocol = "simple";
  s.fixed_latency_s = 5e-6;
  Transfer a;
  a.src = g[0];
  a.dst = g[1];
  a.bytes = a.payload_bytes = 1024;
  a.steps = steps;
  a.step_latency_s = 1e-6;
  Transfer b = a;
  b.src = g[1];
  b.dst = g[2];
  b.deps = {0};
  s.transfers = {a, b};
  return s;
}
}  // namespace

TEST_CASE("back_to_back: launches first, deps shifted, sender's launch only, previous copy ends the launch") {
  const System sys(system_spec("dgx-a100", {}, "default"));
  const topo::Topology& t = sys.topology();
  const auto& g = t.gpus();
  const Schedule s = chain(t, 1);
  const BackToBack b = back_to_back(s, 3, t);
  REQUIRE(b.gpus == std::vector<topo::NodeId>{g[0], g[1], g[2]});
  REQUIRE(b.copy_begin == std::vector<std::size_t>{0, 5, 10, 15});
  CHECK(b.schedule.fixed_latency_s == 0);
  CHECK(b.schedule.transfers.size() == 15);
  for (std::size_t c = 0; c < 3; ++c) {
    const std::size_t base = 5 * c;
    for (std::size_t k = 0; k < 3; ++k) {  // the launches
      const auto& l = b.schedule.transfers[base + k];
      CHECK(l.src == g[k]);
      CHECK(l.dst == g[k]);
      CHECK(l.bytes == 0);
      CHECK(l.step_latency_s == s.fixed_latency_s);
    }
    const auto& a = b.schedule.transfers[base + 3];
    const auto& x = b.schedule.transfers[base + 4];
    CHECK(a.src == g[0]);
    CHECK(x.src == g[1]);
    CHECK(a.deps == std::vector<std::uint32_t>{static_cast<std::uint32_t>(base + 0)});  // g0's launch only
    // g1 -> g2 waits for g0 -> g1 of the same copy and g1's launch, not g2's.
    CHECK(x.deps == std::vector<std::uint32_t>{static_cast<std::uint32_t>(base + 1), static_cast<std::uint32_t>(base + 3)});
    if (c == 0) {
      for (std::size_t k = 0; k < 3; ++k) CHECK(b.schedule.transfers[k].deps.empty());
    } else {
      const std::size_t prev = base - 5;
      // A GPU's next call starts when everything it sent or received in the previous one is done.
      CHECK(b.schedule.transfers[base + 0].deps == std::vector<std::uint32_t>{static_cast<std::uint32_t>(prev + 3)});
      CHECK(b.schedule.transfers[base + 1].deps ==
            std::vector<std::uint32_t>{static_cast<std::uint32_t>(prev + 3), static_cast<std::uint32_t>(prev + 4)});
      CHECK(b.schedule.transfers[base + 2].deps == std::vector<std::uint32_t>{static_cast<std::uint32_t>(prev + 4)});
    }
  }
}

TEST_CASE("back_to_back flow control: a call filling the slots waits for the receiver to pass the last one on") {
  const System sys(system_spec("dgx-a100", {}, "default"));
  const topo::Topology& t = sys.topology();
  // 8 steps = NCCL_STEPS slots: the sender may run one call ahead, so g0 -> g1 of copy 1 waits for g1 -> g2
  // of copy 0.
  const BackToBack full = back_to_back(chain(t, 8), 3, t);
  CHECK(has(full.schedule.transfers[5 + 3].deps, 0 + 4));
  CHECK(has(full.schedule.transfers[10 + 3].deps, 5 + 4));
  CHECK(!has(full.schedule.transfers[10 + 3].deps, 0 + 4));
  // 4 steps: two calls ahead, so copy 2 waits for copy 0's forwarding and copy 1 for nothing downstream.
  const BackToBack half = back_to_back(chain(t, 4), 3, t);
  CHECK(half.schedule.transfers[5 + 3].deps == std::vector<std::uint32_t>{5});
  CHECK(has(half.schedule.transfers[10 + 3].deps, 0 + 4));
  // One slot per call: up to 8 calls ahead, so no downstream wait within 3 copies. The last hop has no
  // forwarding to wait for at all.
  const BackToBack one = back_to_back(chain(t, 1), 3, t);
  CHECK(one.schedule.transfers[10 + 3].deps == std::vector<std::uint32_t>{10});
  CHECK(full.schedule.transfers[10 + 4].deps == std::vector<std::uint32_t>{11, 13});
}

TEST_CASE("back_to_back rejects transfers standing for symmetric copies and a copy count below 1") {
  const System sys(system_spec("dgx-a100", {}, "default"));
  const topo::Topology& t = sys.topology();
  Schedule s = chain(t, 1);
  CHECK_THROWS_AS(back_to_back(s, 0, t), InputError);
  s.transfers[1].replicas = 4;
  CHECK_THROWS_WITH_AS(back_to_back(s, 2, t), doctest::Contains("replicas > 1"), InputError);
}

TEST_CASE("loop arithmetic: copy finishes per GPU, steady period, nccl-tests time per call") {
  const System sys(system_spec("dgx-a100", {}, "default"));
  const topo::Topology& t = sys.topology();
  const auto& g = t.gpus();
  const BackToBack b = back_to_back(chain(t, 1), 4, t);
  // Made-up finish times: copy c's transfers finish at 10 c + index-in-copy (us).
  std::vector<double> f(b.schedule.transfers.size());
  for (std::size_t c = 0; c < 4; ++c)
    for (std::size_t i = b.copy_begin[c]; i < b.copy_begin[c + 1]; ++i) f[i] = 10.0 * c + (i - b.copy_begin[c]);
  // g0 touches its launch (0) and g0 -> g1 (3); g2 its launch (2) and g1 -> g2 (4).
  CHECK(copy_finish_s(b, f, g[0]) == std::vector<double>{3, 13, 23, 33});
  CHECK(copy_finish_s(b, f, g[2]) == std::vector<double>{4, 14, 24, 34});
  // The slowest rank (fabricsim-nccl-bench reports it): per copy, the last GPU to finish.
  CHECK(copy_finish_s(b, f, topo::kNoNode) == std::vector<double>{4, 14, 24, 34});
  CHECK_THROWS_AS(copy_finish_s(b, f, g[5]), InputError);
  CHECK_THROWS_AS(copy_finish_s(b, std::vector<double>(3), g[0]), InputError);
  CHECK(steady_period_s(b, f) == doctest::Approx(10));
  // The slowest GPU sets the period: stretch g2's last copy.
  f[b.copy_begin[3] + 4] = 44;  // (44 - 14) / 2
  CHECK(steady_period_s(b, f) == doctest::Approx(15));
  // nccl-tests divides the loop's time by its iterations: the simulated copies, then the period.
  CHECK(loop_time_per_call_s({3, 13, 23, 33}, 10, 100) == doctest::Approx((33 + 96 * 10) / 100.0));
  CHECK(loop_time_per_call_s({3, 13, 23, 33}, 10, 2) == doctest::Approx(13 / 2.0));
  CHECK_THROWS_AS(loop_time_per_call_s({}, 10, 100), InputError);
  CHECK_THROWS_AS(loop_time_per_call_s({3, 13}, 10, 0), InputError);
}
