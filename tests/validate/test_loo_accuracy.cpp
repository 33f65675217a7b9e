// Leave-one-out accuracy of calibrate + simulate on the shared nccl-tests logs (issue 4).
//
// The targets: for sizes >= 1 MiB, median |busbw error| <= 5 % and p90 <= 12 %; below 1 MiB,
// median <= 15 %. On the whole shared data set all three fits meet the < 1 MiB median bound (default 9.1 %,
// --split-fit 9.6 %, --nccl-eras 13.3 %), the default fit the >= 1 MiB median bound too (4.8 %), none the p90
// bound (default 17.7 %; docs/validation.md "Collectives: leave-one-out accuracy" explains what limits it;
// measured 2026-11-26 on 49e071a). So this test asserts, for the default fit:
//  1. the two median bounds on the whole set;
//  2. the medians on the subset where they hold (the Together H100 ring logs, NCCL 2.26), and a
//     guard on that subset's p90 (7.7 %: within the 12 %);
//  3. regression guards at the measured whole-set values (rounded up to the next percent), so any change that
//     makes the model worse fails here. Tighten these as the model improves. Re-based with each model change
//     (before -> after, measured with the three fits of this test):
//     - 2026-11-22 02:05 UTC, NIC-aware rings and tree heads, NCCL's double binary tree, no `hierarchical`:
//       9.4 / 41.6 / 21.7 % -> 5.9 / 46.0 / 17.1 % (>= 1 MiB median / p90 / < 1 MiB median);
//     - 2026-11-22 04:05-04:22 UTC, NCCL's Tree pricing and llMaxBws in the tuner, nccl-tests' host launch
//       floor, NCCL's p2p protocol rule: 5.9 / 46.0 / 17.1 / 64.7 % -> 5.3 / 29.5 / 19.3 / 44.5 %;
//     - 2026-11-22 05:15 UTC (second session of the day): defaults no longer taken from a shared log (the
//       B200 log's network efficiency, the DGX H100 log's NVLS peak: each log's leave-one-out prediction
//       used to start from its own value), NVLS/CollNet/PAT latencies fitted in their own groups, a step
//       costs max(NCCL step latency, route latency) instead of their sum, NCCL's treeCorrectionFactor in
//       the tuner: 5.3 / 29.5 / 19.3 / 44.5 % -> 6.2 / 29.6 / 14.0 / 41.5 %. Looser: >= 1 MiB median guard
//       6 -> 7 %, B200 5 -> 8 % (3.4 -> 7.1 %: its network efficiency is now predicted from the ABCI
//       inter-node logs, not taken from the B200 log itself), ABCI V intra 5 -> 7 %, --split-fit B200
//       5 -> 27 % (same reason; 4.6 -> 26.2 %). Tighter: < 1 MiB median 20 -> 15 % (the issue bound),
//       < 1 MiB p90 45 -> 42 %, --split-fit < 1 MiB median 24 -> 12 %, V intra 16 -> 9 %;
//     - 2026-11-22 06:20 UTC, NCCL latencies fitted on runs with one GPU per host thread only (not on
//       nccl-tests -g N runs, whose latency-bound sizes sit on the host floor): 6.2 / 29.6 / 14.0 / 41.5 % ->
//       6.3 / 28.8 / 12.9 / 40.8 %; --split-fit B200 26.2 -> 4.6 % (guard back to 5 %), --split-fit
//       9.7 % and --nccl-eras 13.7 % below 1 MiB (both now meet the bound, asserted); Together H100 >= 1 MiB
//       median 3.5 -> 4.7 % (its latencies now come from the DGX H100 log, not from its sibling -g 8 logs);
//     - 2026-11-22 08:10 UTC (third session of the day), the nccl-tests -g host floor grows with the channels
//       NCCL runs a call on (models::nccl_call_channels, channel_launch_s) and the fit retries a failed step
//       up to 10 times (was 6): 6.3 / 28.8 / 12.9 / 40.8 % -> 5.6 / 28.8 / 12.9 / 40.4 %; Together H100
//       >= 1 MiB p90 14.4 -> 7.5 % (guard 15 -> 8 %), --split-fit 14.9 -> 7.4 %. Looser: B200 (default fit)
//       6.4 -> 7.2 % (guard 7 -> 8 %): every B200 point moved 0.5-0.9 % slower, its network efficiency being
//       predicted from the other families' fits, which the -g 8 logs' new floor shifted.
//     - 2026-11-22 10:00 UTC (fourth session of the day), NVLS in NCCL's loops with a latency per loop and an
//       efficiency of its own, defaults fitted on an external 8x H100 sweep (tests/data/external): 5.6 / 28.8
//       / 12.9 / 40.4 % -> 5.1 / 26.7 / 12.9 / 40.4 %. Tighter: >= 1 MiB p90 guard 29 -> 27 %, B200 8 -> 6 %,
//       --split-fit p90 32 -> 31 %; new: the h100 family's p90 (6.9 %) guarded at 7 %. Together H100 p90
//       7.5 -> 7.8 % (guard 8 % kept).
//     - 2026-11-22 17:00 UTC (session 10), LL bound per channel (calibration ll_channel_rate, NCCL's per-call
//       channel count; default fitted on the external 8x H100 sweep): 5.1 / 26.7 / 12.9 / 40.4 % -> 4.8 / 29.0
//       / 13.1 / 46.7 %. Tighter: >= 1 MiB median 6 -> 5 % (the issue bound, met: 68 of 133 points within
//       5 %), B200 6 -> 3 % (5.5 -> 2.6 %), --split-fit p90 31 -> 29 %, < 1 MiB p90 46 -> 45 %, --nccl-eras
//       median 6 -> 5 % (bound met, 4.6 %), p90 30 -> 26 %. Looser: >= 1 MiB p90 27 -> 30 % (Azure's 2-4 MiB LL
//       rows and the ABCI A 4-GPU LL128 rows), < 1 MiB p90 41 -> 47 % and --nccl-eras 42 -> 48 % (the B200
//       send/recv log's small sizes, 18.0 -> 47.0 % median: its prediction comes from the other families'
//       Simple latency, which the ABCI LL rows no longer inflate, 30.9 -> 10.4 us).
//     - 2026-11-26 (session 13, multinode2), NCCL's net overhead (>= 1 us per intra-node step of a multi-node
//       ring) and ring plateau factor in the tuner, NVLS_TREE: 4.8 / 29.0 / 13.1 / 46.7 % -> 4.8 / 17.7 / 9.1 /
//       36.6 %; ABCI V intra 6.7 -> 5.4 %. Tighter: >= 1 MiB p90 30 -> 18 %, < 1 MiB p90 47 -> 37 %, V intra
//       7 -> 6 %. Looser (the fits that were chosen on other models): --split-fit 5.2 -> 6.2 %, p90 28.4 ->
//       31.1 %, its B200 1.9 -> 12.1 %; --nccl-eras 4.6 -> 5.2 % (out of the issue bound). Measured with only
//       the net overhead (no plateau factor): default p90 22.8 %, but B200 4.1 % and V intra 10.3 %: not kept.
//  4. the ABCI V intra-node log (4x V100): NVLink efficiency is fitted on single-host runs only
//     (validate/calibrate.cpp `relevant`); before that rule its LOO error was 80 % (the inter-node logs drove
//     nvlink_efficiency.v100 to 0.10).
// and for the --split-fit and --nccl-eras fits (options, not the default): regression guards at their
// measured values; both meet the < 1 MiB median bound too (11.9 %, 10.6 %), asserted.
// It runs the real fits three times (about 3 min of CPU in Release; longer when the 2 cores are busy).
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
  MESSAGE(std::string(fit) << " LOO: >= 1 MiB median " << rep.summary.large.median << " p90 " << rep.summary.large.p90
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
    CHECK(s.large.p90 <= 0.08);     // guard; measured 7.7 % (issue bound 12 %; 14.4 % before the channel floor)
    CHECK(s.small.median <= 0.15);  // issue bound; measured 1.4 %
  }

  {  // whole shared set: the issue's < 1 MiB median bound, regression guards for the >= 1 MiB bounds (NOT met)
    whole_set("all logs", r);
    // Measured 2026-11-26 on 49e071a (docs/validation.md): 4.8 % / 17.7 %; 9.1 % / 36.6 %.
    CHECK(r.summary.large.median <= 0.05);  // issue bound (met: 69 of 133 points within 5 %, 67 needed)
    CHECK(r.summary.large.p90 <= 0.18);     // guard (issue bound 12 %: not met); 17.7 % since NCCL's ring net
                                            // overhead and plateau in the tuner (29.0 % before, 2026-11-26)
    CHECK(r.summary.small.median <= 0.15);  // issue bound (measured 9.1 %)
    CHECK(r.summary.small.p90 <= 0.37);     // guard; measured 36.6 % (46.7 % before the ring net overhead)
    ErrorSummary b = subset(r, "together_b200", 2);
    MESSAGE("B200 LOO (default fit): >= 1 MiB median " << b.large.median);
    CHECK(b.large.median <= 0.03);  // measured 2.9 % (5.5 % before the per-channel LL rate; 3.4 % when the
                                    // default network efficiency came from this log)
    ErrorSummary h = subset(r, "h100_1node", 4);
    MESSAGE("h100 family LOO (default fit): >= 1 MiB median " << h.large.median << " p90 " << h.large.p90);
    CHECK(h.large.median <= 0.05);  // issue bound; measured 3.8 %
    CHECK(h.large.p90 <= 0.07);     // guard; measured 6.8 % (16.4 % before NVLS loops: the DGX H100 log)
    CHECK(h.small.p90 <= 0.08);     // guard; measured 7.0 % (13.1 % before the per-channel LL rate)
  }

  {  // ABCI V intra-node (single-host V100): regression guard at the measured value
    ErrorSummary s = subset(r, "abci_intra_vnode", 1);
    MESSAGE("ABCI V intra LOO: >= 1 MiB median " << s.large.median << "; < 1 MiB median " << s.small.median);
    CHECK(s.large.count == 6);
    // measured 6.7 % (4.0 % before the 05:15 change, 15.7 % before the 04:05 one, 9.9 % before the 02:05
    // one, 80.3 % before the single-host NVLink rule)
    CHECK(s.large.median <= 0.06);  // 5.4 % since the ring net overhead (its family fit moved), 6.7 % before
  }

  {  // --split-fit: regression guards at its measured values. Its configuration was chosen on an older model
     // (then 9.7 % / 38.0 %; 17.6 % / 66.0 %, B200 5.6 %, V intra 6.2 %) (docs/validation.md).
    whole_set("split-fit", rs);
    // Re-based 2026-11-26 with NCCL's ring net overhead and plateau factor in the tuner (NCCL >= 2.18 rules, also
    // applied to ABCI's NCCL 2.8.4 runs): 5.2 -> 6.2 %, p90 28.4 -> 31.1 %, B200 1.9 -> 12.1 %
    // (docs/validation.md "Multi-node logs"); the default fit above improved (p90 29.0 -> 17.7 %).
    // Re-based 2026-11-28: a calibration with NCCL's eras prices the ABCI runs (NCCL 2.8.4) with NCCL 2.8.4's
    // tuner rules too (models::nccl_tuner_rules; validate/simulate.cpp): 6.2 -> 5.4 %, p90 31.1 -> 26.6 %,
    // < 1 MiB 11.9 -> 9.6 %, p90 44.6 -> 42.4 %; ABCI V100 4 GPUs 7.7 -> 9.3 % (below).
    CHECK(rs.summary.large.median <= 0.055);  // measured 5.4 %
    CHECK(rs.summary.large.p90 <= 0.27);      // measured 26.6 %
    CHECK(rs.summary.small.median <= 0.10);  // measured 9.6 % (issue bound 15 %)
    CHECK(rs.summary.small.p90 <= 0.43);     // measured 42.4 %
    ErrorSummary b = subset(rs, "together_b200", 2);
    MESSAGE("B200 LOO: split-fit >= 1 MiB median " << b.large.median);
    CHECK(b.large.median <= 0.03);  // measured 2.0 % (12.1 % with NCCL 2.18+'s rules on the ABCI runs; 1.9 %
                                    // before the ring net overhead; 26.2 % at 05:15)
    ErrorSummary v = subset(rs, "abci_intra_vnode", 1);
    CHECK(v.large.median <= 0.094);  // measured 9.3 % (7.7 % with NCCL 2.18+'s rules on the ABCI runs)
    ErrorSummary t = subset(rs, "together_h100_", 3);
    CHECK(t.large.median <= 0.05);   // measured 3.9 %
    CHECK(t.small.median <= 0.02);   // measured 1.4 %
    CHECK(t.large.p90 <= 0.08);      // measured 7.5 %
  }

  {  // --nccl-eras: regression guards at its measured values
    whole_set("nccl-eras", re);
    // Re-based 2026-11-28 with NCCL 2.8.4's tuner rules for the ABCI runs (see --split-fit): >= 1 MiB 5.2 ->
    // 5.3 %, < 1 MiB 10.6 -> 13.3 %, p90 39.7 -> 45.9 % (the multi-host ABCI runs take Ring LL where NCCL 2.8.4
    // does, which the lockstep ring prices slow; docs/validation.md "Multi-node logs", known limits).
    CHECK(re.summary.large.median <= 0.054);  // measured 5.3 % (4.6 % before the ring net overhead: no longer
                                              // within the issue bound)
    CHECK(re.summary.large.p90 <= 0.26);     // measured 25.0 %
    CHECK(re.summary.small.median <= 0.15);  // issue bound; measured 13.3 %
    CHECK(re.summary.small.p90 <= 0.47);     // measured 45.9 %
  }
}
