// In-network reductions through one switch of many hosts (SHARP on a hand-written star, bench::one_switch_star):
// the schedule lists the all-to-all dependency between the switch's inputs and outputs through joins
// (models/schedule.hpp), so its dependencies grow with the hosts, not their square, and it runs to the same
// times as the same schedule with every join's dependencies written out on the transfers that wait for it.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "bench/bench_util.hpp"
#include "models/calibration.hpp"
#include "models/collectives.hpp"
#include "sim/engine/schedule_runner.hpp"
#include "topologies/routing.hpp"

using namespace fabricsim;

namespace {

// `s` without its joins: a transfer that waited for a join waits for what the join waited for.
models::Schedule without_joins(const models::Schedule& s) {
  models::Schedule out = s;
  out.transfers.clear();
  std::vector<std::int64_t> index(s.transfers.size(), -1);
  std::vector<std::vector<std::uint32_t>> join_deps(s.transfers.size());
  for (std::size_t i = 0; i < s.transfers.size(); ++i) {
    const models::Transfer& tr = s.transfers[i];
    std::vector<std::uint32_t> deps;
    for (std::uint32_t d : tr.deps) {
      if (index[d] >= 0) deps.push_back(static_cast<std::uint32_t>(index[d]));
      else deps.insert(deps.end(), join_deps[d].begin(), join_deps[d].end());
    }
    std::sort(deps.begin(), deps.end());
    deps.erase(std::unique(deps.begin(), deps.end()), deps.end());
    if (models::is_join(tr)) {
      join_deps[i] = std::move(deps);
      continue;
    }
    index[i] = static_cast<std::int64_t>(out.transfers.size());
    out.transfers.push_back(tr);
    out.transfers.back().deps = std::move(deps);
  }
  return out;
}

// A CollNet all_reduce of `bytes` over every GPU of `t`.
models::CollectiveSpec collnet_all_reduce(const topo::Topology& t, std::uint64_t bytes, models::Fidelity f) {
  models::CollectiveSpec spec;
  spec.op = models::Op::AllReduce;
  spec.bytes = bytes;
  spec.algorithm = models::Algorithm::CollNet;
  spec.protocol = models::Protocol::Simple;
  spec.communicator = t.gpus();
  spec.fidelity = f;
  return spec;
}

std::size_t dependencies(const models::Schedule& s) {
  std::size_t n = 0;
  for (const auto& tr : s.transfers) n += tr.deps.size();
  return n;
}

}  // namespace

TEST_CASE("SHARP on one switch of 400 hosts: joins keep the dependencies linear, with the times of the plain DAG") {
  const int hosts = 400;
  const topo::Topology t = bench::one_switch_star(hosts, true);
  topo::Routing routing(t);
  const models::Calibration calib = models::default_calibration();
  for (const models::Fidelity f : {models::Fidelity::Step, models::Fidelity::Phase}) {
    const models::Schedule s =
        models::build_schedule(collnet_all_reduce(t, std::uint64_t{4} << 20, f), t, routing, calib);
    const models::Schedule plain = without_joins(s);
    const std::size_t joins = s.transfers.size() - models::counted_transfers(s);
    INFO(s.fidelity << ": " << s.transfers.size() << " transfers, " << joins << " joins");
    REQUIRE(joins > 0);
    CHECK(plain.transfers.size() == models::counted_transfers(s));
    // Every output of the switch waits for every input: hosts^2 dependencies per chunk written out, about three
    // per transfer through the joins.
    CHECK(dependencies(plain) >= static_cast<std::size_t>(hosts) * hosts * joins);
    CHECK(dependencies(s) <= 3 * s.transfers.size());
    const sim::ScheduleResult a = sim::run_schedule(s, t, routing, calib);
    const sim::ScheduleResult b = sim::run_schedule(plain, t, routing, calib);
    CHECK(a.makespan_s == b.makespan_s);
    std::size_t k = 0, differ = 0;
    for (std::size_t i = 0; i < s.transfers.size(); ++i) {
      if (models::is_join(s.transfers[i])) continue;
      differ += a.transfers[i].start_s != b.transfers[k].start_s || a.transfers[i].finish_s != b.transfers[k].finish_s;
      ++k;
    }
    CHECK(differ == 0);
  }
}

TEST_CASE("SHARP on one switch: a join at most where the dependencies would exceed 65,536 per chunk") {
  // 200 hosts: 40,000 dependencies per chunk, the schedule keeps its plain form (every transfer a hop).
  const topo::Topology t = bench::one_switch_star(200, true);
  topo::Routing routing(t);
  const models::Schedule s = models::build_schedule(
      collnet_all_reduce(t, std::uint64_t{1} << 20, models::Fidelity::Auto), t, routing, models::default_calibration());
  CHECK(models::counted_transfers(s) == s.transfers.size());
  for (const auto& tr : s.transfers) CHECK(tr.src != tr.dst);
}
