// Leave-one-out accuracy of calibrate + simulate on the shared nccl-tests logs (issue 4).
//
// The targets: for sizes >= 1 MiB, median |busbw error| <= 5 % and p90 <= 12 %; below 1 MiB,
// median <= 15 %. The model does NOT reach them on the whole shared data set (docs/validation.md
// "Leave-one-out accuracy": default fit >= 1 MiB median 5.3 %, p90 29.5 %; < 1 MiB median 19.3 %, p90
// 44.5 %). docs/validation.md explains what limits it. So this test asserts, for the default fit:
//  1. the medians on the subset where they hold (the Together H100 ring logs, NCCL 2.26), and a
//     guard on that subset's p90 (14.5 %: over the 12 % since 2026-11-22, see below);
//  2. regression guards at the measured whole-set values (rounded up to the next percent), so any change that
//     makes the model worse fails here. Tighten these as the model improves. Re-based twice, each time with
//     a model change that docs/validation.md records with before/after numbers:
//     - 2026-11-22 02:05 UTC, NIC-aware rings and tree heads, NCCL's double binary tree, no `hierarchical`:
//       9.4 / 41.6 / 21.7 % -> 5.9 / 46.0 / 17.1 % (>= 1 MiB median / p90 / < 1 MiB median);
//     - 2026-11-22 04:05 UTC, the tuner prices Tree and LL with NCCL's own model (tree busBw / 2 at every
//       node count, llMaxBws) and the validation models nccl-tests' host launch floor (-g 8 runs):
//       5.9 / 46.0 / 17.1 / 64.7 % -> 5.3 / 29.5 / 20.5 / 46.2 % (and < 1 MiB p90); with NCCL's p2p protocol
//       rule (04:22 UTC) 19.3 / 44.5 % below 1 MiB. The < 1 MiB median got
//       worse (its guard moved 18 -> 20 %) and the Together H100 p90 rose from 9.8 to 14.5 %: with the host
//       floor explaining their 35 us plateau, the fit no longer inflates LL's latency, and the tuner runs
//       1-4 MiB with LL where the logs look like LL128.
//  3. the ABCI V intra-node log (4x V100): NVLink efficiency is fitted on single-host runs only
//     (validate/calibrate.cpp `relevant`); before that rule its LOO error was 80 % (the inter-node logs drove
//     nvlink_efficiency.v100 to 0.10).
// and for the --split-fit and --nccl-eras fits (options, not the default): regression guards at their
// measured values. Neither meets an issue bound on the whole set since the change above (--nccl-eras met the
// < 1 MiB median before it: 11.0 %, now 21.9 %).
// It runs the real fits three times (about 2.5 min of CPU in Release; longer when the 2 cores are busy).
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

// Prints one fit's whole-set summary and checks that it covers every shared point (133 sizes >= 1 MiB, 224
// below).
void whole_set(const char* fit, const Report& rep) {
  MESSAGE(fit << " LOO: >= 1 MiB median " << rep.summary.large.median << " p90 " << rep.summary.large.p90
              << "; < 1 MiB median " << rep.summary.small.median << " p90 " << rep.summary.small.p90);
  CHECK(rep.summary.large.count == 133);
  CHECK(rep.summary.small.count == 224);
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
    CHECK(s.large.median <= 0.05);  // issue bound; measured 4.1 %
    CHECK(s.large.p90 <= 0.15);     // guard; measured 14.5 % (issue bound 12 %: not met, see header)
    CHECK(s.small.median <= 0.15);  // issue bound; measured 3.2 %
  }

  {  // whole shared set: regression guards at the measured values (issue bounds NOT met, see header)
    whole_set("all logs", r);
    // Measured 2026-11-22 04:22 UTC (docs/validation.md): 5.3 % / 29.5 %; 19.3 % / 44.5 %.
    CHECK(r.summary.large.median <= 0.06);
    CHECK(r.summary.large.p90 <= 0.30);
    CHECK(r.summary.small.median <= 0.20);
    CHECK(r.summary.small.p90 <= 0.45);
    ErrorSummary b = subset(r, "together_b200", 2);
    MESSAGE("B200 LOO (default fit): >= 1 MiB median " << b.large.median);
    CHECK(b.large.median <= 0.05);  // measured 3.4 % (41.6 % before the 02:05 change)
  }

  {  // ABCI V intra-node (single-host V100): regression guard at the measured value
    ErrorSummary s = subset(r, "abci_intra_vnode", 1);
    MESSAGE("ABCI V intra LOO: >= 1 MiB median " << s.large.median << "; < 1 MiB median " << s.small.median);
    CHECK(s.large.count == 6);
    // measured 4.0 % (15.7 % before the 04:05 change, 9.9 % before the 02:05 one, 80.3 % before the
    // single-host NVLink rule)
    CHECK(s.large.median <= 0.05);
  }

  {  // --split-fit: regression guards at its measured values. Its configuration was chosen on an older model
     // (then 9.7 % / 38.0 %; 17.6 % / 66.0 %, B200 5.6 %, V intra 6.2 %); on the current model it is worse
     // than the default fit on every whole-set number (docs/validation.md).
    whole_set("split-fit", rs);
    CHECK(rs.summary.large.median <= 0.10);  // measured 9.4 %
    CHECK(rs.summary.large.p90 <= 0.43);     // measured 42.9 %
    CHECK(rs.summary.small.median <= 0.24);  // measured 23.0 % (22.3 % before the p2p protocol rule)
    CHECK(rs.summary.small.p90 <= 0.69);     // measured 68.3 %
    ErrorSummary b = subset(rs, "together_b200", 2);
    MESSAGE("B200 LOO: split-fit >= 1 MiB median " << b.large.median);
    CHECK(b.large.median <= 0.05);  // measured 4.6 %
    ErrorSummary v = subset(rs, "abci_intra_vnode", 1);
    CHECK(v.large.median <= 0.16);  // measured 15.8 %
    ErrorSummary t = subset(rs, "together_h100_", 3);
    CHECK(t.large.median <= 0.04);   // measured 3.9 %
    CHECK(t.small.median <= 0.04);   // measured 3.2 %
    CHECK(t.large.p90 <= 0.15);      // measured 14.5 %
  }

  {  // --nccl-eras: regression guards at its measured values
    whole_set("nccl-eras", re);
    CHECK(re.summary.large.median <= 0.08);  // measured 7.9 %
    CHECK(re.summary.large.p90 <= 0.33);     // measured 32.1 %
    CHECK(re.summary.small.median <= 0.22);  // measured 21.9 % (11.0 % before the 04:05 change)
    CHECK(re.summary.small.p90 <= 0.64);     // measured 63.1 %
  }
}
