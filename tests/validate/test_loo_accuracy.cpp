// Leave-one-out accuracy of calibrate + simulate on the shared nccl-tests logs (issue 4).
//
// The targets: for sizes >= 1 MiB, median |busbw error| <= 5 % and p90 <= 12 %; below 1 MiB,
// median <= 15 %. The model does NOT reach them on the whole shared data set (docs/validation.md
// "Leave-one-out accuracy": default fit >= 1 MiB median 5.9 %, p90 46.0 %; < 1 MiB median 17.1 %;
// --split-fit 13.4 %, 43.8 %; 22.4 %). docs/validation.md explains what limits it.
// So this test asserts, for the default fit:
//  1. the bounds on the subset where they hold (the Together H100 ring logs, NCCL 2.26), and
//  2. regression guards at the measured whole-set values (rounded up to the next percent), so any change that
//     makes the model worse fails here. Tighten these as the model improves. They were re-based once, on
//     2026-11-22, when rings and tree heads started to follow NCCL's one-NIC-per-channel paths, trees became
//     NCCL's complementary double binary tree and the validation stopped predicting with `hierarchical`
//     (an algorithm no NCCL has): the medians and the B200 log improved (9.4 -> 5.9 %, 21.7 -> 17.1 %,
//     41.6 -> 4.3 %), the p90 >= 1 MiB and the ABCI V intra log got worse (41.6 -> 46.0 %, 9.9 -> 15.7 %);
//     both guards moved with that change and say so.
//  3. the ABCI V intra-node log (4x V100): NVLink efficiency is fitted on single-host runs only
//     (validate/calibrate.cpp `relevant`); before that rule its LOO error was 80 % (the inter-node logs drove
//     nvlink_efficiency.v100 to 0.10).
// and for the --split-fit fit (FitOptions::split_identification: NCCL 2.8-2.17 tuning table, LL/LL128
// efficiencies and a multi-host launch factor, each parameter identified from the runs that show it):
//  4. regression guards at its measured values and that it beats the default fit on the p90 >= 1 MiB;
// and for the --nccl-eras fit (FitOptions::nccl_eras: only the NCCL 2.8-2.17 tuning table with its own
// latency multipliers, added 2026-11-22):
//  5. the issue's < 1 MiB median bound (15 %) on the whole set, which it meets (11.0 %), and regression
//     guards at its measured >= 1 MiB values (median 9.0 %, p90 43.3 %: worse than the default fit's median).
// It runs the real fits three times (about 2 min of CPU in Release; longer when the 2 cores are busy).
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>

#include "models/calibration.hpp"
#include "validate/report.hpp"

using namespace fabricsim;
using namespace fabricsim::validate;

namespace {
ErrorSummary subset(const Report& r, const char* needle, std::size_t expect_logs) {
  std::vector<LogCompare> sub;
  for (const auto& l : r.logs)
    if (l.source.find(needle) != std::string::npos) sub.push_back(l);
  REQUIRE(sub.size() == expect_logs);
  return summarize(sub);
}
}  // namespace

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
  FitOptions split_opt;
  split_opt.split_identification = true;
  Report rs = leave_one_out(cases, models::default_calibration(), split_opt);
  FitOptions eras_opt;
  eras_opt.nccl_eras = true;
  Report re = leave_one_out(cases, models::default_calibration(), eras_opt);
  REQUIRE(r.logs.size() == 16);  // 15 files, the B200 file holds two runs

  // Every prediction was made by a calibration fitted without its own log.
  REQUIRE(rs.logs.size() == 16);
  REQUIRE(re.logs.size() == 16);
  for (const Report* rep : {&r, &rs, &re})
    for (const auto& l : rep->logs) {
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
    // Measured 2026-11-22 with NIC-aware rings/tree heads, NCCL's double binary tree and no `hierarchical`
    // in the validation mapping (docs/validation.md): 5.9 % / 46.0 %; 17.1 %. Before that change: 9.4 % /
    // 41.6 %; 21.7 %: the median and small sizes improved, the p90 >= 1 MiB got worse (ABCI A 4 nodes).
    CHECK(r.summary.large.median <= 0.06);
    CHECK(r.summary.large.p90 <= 0.47);
    CHECK(r.summary.small.median <= 0.18);
    ErrorSummary b = subset(r, "together_b200", 2);
    MESSAGE("B200 LOO (default fit): >= 1 MiB median " << b.large.median);
    CHECK(b.large.median <= 0.05);  // measured 4.3 % (41.6 % before the change above)
  }

  {  // ABCI V intra-node (single-host V100): regression guard at the measured value
    ErrorSummary s = subset(r, "abci_intra_vnode", 1);
    MESSAGE("ABCI V intra LOO: >= 1 MiB median " << s.large.median << "; < 1 MiB median " << s.small.median);
    CHECK(s.large.count == 6);
    // measured 15.7 %; 9.9 % before the ring/tree change above (its fit on the V inter-node logs moved),
    // 80.3 % before the single-host NVLink rule
    CHECK(s.large.median <= 0.16);
  }

  {  // --split-fit: regression guards at its measured values. Its configuration was chosen on the model
     // before the ring/tree change (then 9.7 % / 38.0 %; 17.6 % / 66.0 %, B200 5.6 %, V intra 6.2 %); on
     // the current model it is worse than the default fit except on the p90 >= 1 MiB (docs/validation.md).
    MESSAGE("split-fit LOO: >= 1 MiB median " << rs.summary.large.median << " p90 " << rs.summary.large.p90
                                              << "; < 1 MiB median " << rs.summary.small.median << " p90 "
                                              << rs.summary.small.p90);
    CHECK(rs.summary.large.count == 133);
    CHECK(rs.summary.small.count == 224);
    CHECK(rs.summary.large.median <= 0.14);  // measured 13.4 %
    CHECK(rs.summary.large.p90 <= 0.44);     // measured 43.8 %
    CHECK(rs.summary.small.median <= 0.23);  // measured 22.4 %
    CHECK(rs.summary.small.p90 <= 0.71);     // measured 70.6 %
    CHECK(rs.summary.large.p90 < r.summary.large.p90);
    ErrorSummary b = subset(rs, "together_b200", 2);
    MESSAGE("B200 LOO: split-fit >= 1 MiB median " << b.large.median);
    CHECK(b.large.median <= 0.09);  // measured 9.0 %
    ErrorSummary v = subset(rs, "abci_intra_vnode", 1);
    CHECK(v.large.median <= 0.17);  // measured 16.0 %
    ErrorSummary t = subset(rs, "together_h100_", 3);
    CHECK(t.large.median <= 0.05);   // measured 3.7 %
    CHECK(t.small.median <= 0.08);   // measured 7.0 %
    CHECK(t.large.p90 <= 0.16);      // measured 15.6 %
  }

  {  // --nccl-eras: meets the issue's < 1 MiB median bound on the whole set; guards on the rest
    MESSAGE("nccl-eras LOO: >= 1 MiB median " << re.summary.large.median << " p90 " << re.summary.large.p90
                                              << "; < 1 MiB median " << re.summary.small.median << " p90 "
                                              << re.summary.small.p90);
    CHECK(re.summary.large.count == 133);
    CHECK(re.summary.small.count == 224);
    CHECK(re.summary.small.median <= 0.15);  // the bound; measured 11.0 %
    CHECK(re.summary.small.median < r.summary.small.median);
    CHECK(re.summary.large.median <= 0.10);  // measured 9.0 %
    CHECK(re.summary.large.p90 <= 0.44);     // measured 43.3 %
    CHECK(re.summary.small.p90 <= 0.73);     // measured 72.4 %
  }
}
