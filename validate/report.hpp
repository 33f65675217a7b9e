#pragma once
// Measured vs simulated: per log and size, the measured and simulated time and bus bandwidth and the busbw
// error; a summary of absolute busbw errors (median and 90th percentile, for sizes >= 1 MiB and below);
// text, JSON and a hand-written SVG plot. Leave-one-out evaluation of the calibration fit.
//
// Error convention: busbw error = simulated busbw / measured busbw - 1 = t_measured / t_simulated - 1
// (positive: the simulator is optimistic). Percentiles use the nearest-rank method: the p-quantile of n
// sorted values is the ceil(p*n)-th smallest.
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "models/calibration.hpp"
#include "replay/progress.hpp"
#include "validate/calibrate.hpp"

namespace fabricsim::validate {

constexpr std::uint64_t kLargeMessageBytes = 1u << 20;  // the split: >= 1 MiB vs smaller

struct PointCompare {
  std::uint64_t size_bytes = 0;
  double measured_s = 0, simulated_s = 0;
  double measured_busbw_GBps = 0, simulated_busbw_GBps = 0;
  double busbw_error = 0;  // fraction, see the convention above
  std::string algorithm, protocol;
  bool at_host_floor = false;  // the simulated time is the host launch floor, not the collective's
  bool from_log = false;       // algorithm/protocol are NCCL's own, from the log's TUNING lines (SimPoint)
};

struct LogCompare {
  std::string source, op, gpu, mapping, family, calibration;
  int nranks = 0, nodes = 0;
  int gpus_per_thread = 0;       // as the log says (0: unknown, one assumed)
  double host_launch_floor_s = 0;    // models::host_launch_floor_s under this log's calibration, one channel
  double host_channel_launch_s = 0;  // what each extra channel a call runs on adds to that floor
  // The log's NCCL_* settings (validate::nccl_env_effects): honoured, and changing NCCL but not the simulation.
  std::vector<std::string> env_honoured, env_not_modelled;
  std::vector<PointCompare> points;
};

struct ErrorStats {
  std::size_t count = 0;
  double median = 0, p90 = 0, max = 0;  // absolute busbw error, fractions
};

struct ErrorSummary {
  ErrorStats large, small;  // sizes >= kLargeMessageBytes / below
};

struct Report {
  std::string title;
  std::vector<LogCompare> logs;
  ErrorSummary summary;
};

// Nearest-rank quantile of absolute values (q in (0, 1]); 0 for an empty list.
double quantile_abs(std::vector<double> v, double q);
ErrorSummary summarize(const std::vector<LogCompare>& logs);

// Simulates every case with the calibration `calib_for(case_index)` returns.
Report compare(const std::vector<Case>& cases,
               const std::function<const models::Calibration&(std::size_t)>& calib_for, const std::string& title);

// The unit held out in leave-one-out: the raw log file (a file with several runs is held out whole).
std::string log_unit(const Measurement& m);
// With by_system (FitOptions::loo_by_system), a multi-host case's unit is its system instead: "system:" plus
// the superpod mapping's parameters except the node count, plus the GPU models, so every node count of one
// server + fabric + NIC configuration is held out together. Single-host cases keep log_unit.
std::string loo_unit(const Case& c, bool by_system);

// Leave-one-out: for each log file, fit `start` on the other logs of the same hardware family
// (SystemMapping::family) -- or on all other logs when it is the only one of its family -- and predict it.
// `fits` (optional) receives the fitted calibration per held-out unit, in order of first appearance.
// `progress` (optional) advances by one per held-out unit fitted (its total should be
// loo_units(cases, opt.loo_by_system)).
Report leave_one_out(const std::vector<Case>& cases, const models::Calibration& start, const FitOptions& opt,
                     std::vector<std::pair<std::string, FitResult>>* fits = nullptr,
                     sim::Progress* progress = nullptr);
// How many fits leave_one_out runs: the distinct loo_unit()s.
std::size_t loo_units(const std::vector<Case>& cases, bool by_system = false);

// The report's logs grouped by hardware family (LogCompare::family, "-" when empty), families in name order.
std::map<std::string, std::vector<LogCompare>> families(const Report& r);

std::string report_text(const Report& r);
Json report_json(const Report& r);
// One small panel per log (measured busbw dots vs simulated line over message size, log-x) and one error
// panel (signed busbw error in % vs size, every log in its colour) with a legend in columns that fits.
std::string report_svg(const Report& r);

}  // namespace fabricsim::validate
