// The nccl-tests writer used by fabricsim-nccl-bench: its text reads back through the parser unchanged.
#include <doctest/doctest.h>

#include "replay/coll_sweep.hpp"
#include "sim/base/error.hpp"
#include "validate/nccl_log.hpp"
#include "validate/nccl_table.hpp"

using namespace fabricsim;
using namespace fabricsim::validate;

TEST_CASE("size sweep follows nccl-tests -b/-e/-f") {
  using sim::size_sweep;  // the one sweep: coll, the Python coll() and fabricsim-nccl-bench
  auto s = size_sweep(8, 64, 2);
  CHECK(s == std::vector<std::uint64_t>{8, 16, 32, 64});
  CHECK(size_sweep(1024, 1024, 2).size() == 1);
  CHECK(size_sweep(8, 100, 4) == std::vector<std::uint64_t>{8, 32});
  CHECK_THROWS_AS(size_sweep(0, 8, 2), InputError);
  CHECK_THROWS_AS(size_sweep(16, 8, 2), InputError);
  CHECK_THROWS_AS(size_sweep(8, 16, 1), InputError);
  CHECK(size_sweep(8, 8, 1) == std::vector<std::uint64_t>{8});
  // No overflow past the largest size: 2^63 x 2 would wrap.
  CHECK(size_sweep(1ull << 62, ~0ull, 2) == std::vector<std::uint64_t>{1ull << 62, 1ull << 63});
}

TEST_CASE("side_from_time computes algbw and busbw as nccl-tests") {
  Side s = side_from_time("all_reduce", 8, 1u << 30, 5218.59e-6, 0LL);
  CHECK(s.algbw_GBps == doctest::Approx(205.75).epsilon(1e-4));  // together H100 ring, 1 GiB row
  CHECK(s.busbw_GBps == doctest::Approx(360.07).epsilon(1e-4));
  CHECK(s.time_us == doctest::Approx(5218.59));
}

TEST_CASE("formatted bench output parses back into the same measurement") {
  Measurement m;
  m.op = "all_gather";
  m.nranks = 2;
  RunHeader h;
  h.nthread = 1;
  h.ngpus = 2;
  h.min_bytes = 8;
  h.max_bytes = 1 << 20;
  h.step = "2(factor)";
  h.warmup_iters = 5;
  h.iters = 20;
  h.agg_iters = 1;
  h.validation = 1;
  m.header = h;
  for (int r = 0; r < 2; ++r) {
    RankInfo ri;
    ri.rank = r;
    ri.group = 0;
    ri.pid = 1234;
    ri.host = "node-a";
    ri.device = r;
    ri.bus_id = "0000:19:00";
    ri.gpu_name = "NVIDIA H100 80GB HBM3";
    m.ranks.push_back(ri);
  }
  Row a;
  a.size_bytes = 1024;
  a.count = 256;
  a.type = "float";
  a.redop = "none";
  a.root = -1;
  a.oop = side_from_time("all_gather", 2, 1024, 12.5e-6, 0LL);
  a.ip = side_from_time("all_gather", 2, 1024, 11.25e-6, 3LL);
  Row b = a;
  b.size_bytes = 1 << 20;
  b.count = 1 << 18;
  b.oop = side_from_time("all_gather", 2, 1 << 20, 123456.0e-6, 0LL);
  b.ip = Side{};  // not run: prints N/A
  m.rows = {a, b};
  std::string text = format_nccl_tests_text(m);
  auto back = parse_nccl_tests_text(text, "bench.txt");
  REQUIRE(back.size() == 1);
  const auto& p = back[0];
  CHECK(p.op == "all_gather");
  CHECK(p.nranks == 2);
  CHECK(p.hosts == std::vector<std::string>{"node-a"});
  CHECK(p.gpu_model == "NVIDIA H100 80GB HBM3");
  CHECK(p.header->iters == 20);
  REQUIRE(p.rows.size() == 2);
  CHECK(p.rows[0].oop.time_us == doctest::Approx(12.5));
  CHECK(*p.rows[0].ip.wrong == 3);
  CHECK(p.rows[1].oop.time_us == doctest::Approx(123456.0).epsilon(1e-6));
  CHECK(!p.rows[1].ip.present);
  REQUIRE(p.out_of_bounds);
  CHECK(*p.out_of_bounds == 3);
  CHECK(text.find("FAILED") != std::string::npos);
}
