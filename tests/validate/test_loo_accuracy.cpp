// Leave-one-out accuracy of calibrate + simulate on the shared nccl-tests logs (issue 4).
//
// The targets: for sizes >= 1 MiB, median |busbw error| <= 5 % and p90 <= 12 %; below 1 MiB,
// median <= 15 %. The model does NOT reach them on the whole shared data set today (measured 2026-11-21,
// docs/validation.md "Leave-one-out accuracy": >= 1 MiB median 9.4 %, p90 41.6 %; < 1 MiB median 21.7 %).
// The gap comes from the ABCI A100/V100 logs (NCCL 2.8.4, 2021) and the B200 log, which has no other log of its
// family to fit on; docs/validation.md explains which model changes would close it. So this test asserts:
//  1. the bounds on the subset where they hold today (the Together H100 ring logs, NCCL 2.26), and
//  2. regression guards at the measured whole-set values (rounded up to the next percent), so any change that
//     makes the model worse fails here. Tighten these as the model improves; never loosen them to pass.
//  3. the ABCI V intra-node log (4x V100): NVLink efficiency is fitted on single-host runs only
//     (validate/calibrate.cpp `relevant`); before that rule its LOO error was 80 % (the inter-node logs drove
//     nvlink_efficiency.v100 to 0.10). Guarded at the measured 9.9 %.
// It runs the real fits (about 40 s of CPU in Release; several minutes of wall time when the 2 shared cores
// are busy).
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>

#include "models/calibration.hpp"
#include "validate/report.hpp"

using namespace fabricsim;
using namespace fabricsim::validate;

TEST_CASE("leave-one-out accuracy on the shared logs") {
  const std::string data = std::string(FABRICSIM_SOURCE_DIR) + "/tests/data/nccl-tests/";
  std::vector<std::string> metas;
  for (const auto& e : std::filesystem::directory_iterator(data)) {
    std::string p = e.path().string();
    if (p.size() > 10 && p.compare(p.size() - 10, 10, ".meta.json") == 0) metas.push_back(p);
  }
  std::sort(metas.begin(), metas.end());
  REQUIRE(metas.size() == 15);
  std::vector<Measurement> all;
  for (const auto& p : metas)
    for (auto& m : load_measurements(p)) all.push_back(std::move(m));
  auto cases = make_cases(all);
  Report r = leave_one_out(cases, models::default_calibration(), FitOptions{});
  REQUIRE(r.logs.size() == 16);  // 15 files, the B200 file holds two runs

  // Every prediction was made by a calibration fitted without its own log.
  for (const auto& l : r.logs) {
    CAPTURE(l.source);
    std::string file = l.source.substr(l.source.find_last_of('/') + 1);
    file = file.substr(0, file.find("#run"));
    CHECK(l.calibration.find("loo-without-" + file) == 0);
  }

  {  // issue bounds hold on the Together H100 ring logs (plain blocks, not SUBCASEs: the fits run once)
    std::vector<LogCompare> sub;
    for (const auto& l : r.logs)
      if (l.source.find("together_h100_") != std::string::npos) sub.push_back(l);
    REQUIRE(sub.size() == 3);
    ErrorSummary s = summarize(sub);
    MESSAGE("Together H100 ring LOO: >= 1 MiB median " << s.large.median << " p90 " << s.large.p90
                                                       << "; < 1 MiB median " << s.small.median);
    CHECK(s.large.count == 42);
    CHECK(s.large.median <= 0.05);
    CHECK(s.large.p90 <= 0.12);
    CHECK(s.small.median <= 0.15);
  }

  {  // whole shared set: regression guards at the measured values (issue bounds NOT met, see header)
    MESSAGE("all logs LOO: >= 1 MiB median " << r.summary.large.median << " p90 " << r.summary.large.p90
                                              << "; < 1 MiB median " << r.summary.small.median << " p90 "
                                              << r.summary.small.p90);
    CHECK(r.summary.large.count == 133);
    CHECK(r.summary.small.count == 224);
    CHECK(r.summary.large.median <= 0.10);  // measured 9.4 %
    CHECK(r.summary.large.p90 <= 0.42);     // measured 41.6 %
    CHECK(r.summary.small.median <= 0.22);  // measured 21.7 %
  }

  {  // ABCI V intra-node (single-host V100): regression guard at the measured value
    std::vector<LogCompare> sub;
    for (const auto& l : r.logs)
      if (l.source.find("abci_intra_vnode") != std::string::npos) sub.push_back(l);
    REQUIRE(sub.size() == 1);
    ErrorSummary s = summarize(sub);
    MESSAGE("ABCI V intra LOO: >= 1 MiB median " << s.large.median << "; < 1 MiB median " << s.small.median);
    CHECK(s.large.count == 6);
    CHECK(s.large.median <= 0.10);  // measured 9.9 % (80.3 % before the single-host NVLink rule)
  }
}
