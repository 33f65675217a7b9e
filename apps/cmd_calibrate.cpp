// fabricsim calibrate: fit the network model's calibration to nccl-tests measurements (validate/calibrate.hpp).
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <limits>
#include <sstream>

#include "apps/cli.hpp"
#include "apps/log_hints.hpp"
#include "models/calibration.hpp"
#include "sim/base/error.hpp"
#include "sim/base/json_reader.hpp"
#include "sim/base/units.hpp"
#include "validate/calibrate.hpp"
#include "validate/inputs.hpp"
#include "validate/report.hpp"

namespace fabricsim::cli {

namespace {
std::string pct(double f) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f %%", f * 100);
  return b;
}
}  // namespace

int cmd_calibrate(int argc, char** argv) {
  Args args("calibrate", "[options] LOGS... -o CALIB.json",
            "Fits the collective model's calibration (per-protocol latencies, NVLink/network/NVLS/tree efficiencies,\n"
            "the per-channel LL rate)\n"
            "to measured nccl-tests times by robust (Huber) least squares on log-time residuals, prints the fitted\n"
            "parameters and residuals, and writes a calibration file for --calibration. LOGS are nccl-tests text\n"
            "outputs, their .meta.json sidecars (tests/data/nccl-tests), or collective-results JSON files.\n"
            "Without --topology each log is mapped to a preset from its GPU model and host count\n"
            "(docs/validation.md).");
  args.topology_flags();
  args.flag({"--output", "-o", "FILE", "calibration JSON to write", ""});
  args.flag({"--start", "", "FILE", "calibration to start from", "built-in defaults"});
  args.flag({"--name", "", "NAME", "name stored in the calibration file", "fitted"});
  args.flag({"--json", "", "FILE", "also write the fitted parameters and per-row residuals as JSON", ""});
  log_hint_flags(args);
  args.flag({"--iterations", "", "N", "Gauss-Newton iterations at most", "12"});
  args.flag({"--min-bytes", "", "SIZE", "fit only rows of at least this size", "all rows"});
  args.flag({"--max-bytes", "", "SIZE", "fit only rows of at most this size", "all rows"});
  args.flag({"--split-fit", "", "", "also fit NCCL-generation tables and LL/LL128 efficiencies, each parameter from the runs that show it (docs/validation.md)", ""});
  args.flag({"--nccl-eras", "", "", "runs of NCCL 2.8-2.17 use that generation's tuning table with their own latency multipliers (docs/validation.md)", ""});
  if (!args.parse(argc, argv)) return 0;
  // Output paths are checked before fitting (minutes on many logs), so a bad one fails at once.
  args.check_output_flags({"--output", "--json"});
  if (!args.has("--output")) throw InputError("--output", "the calibration file to write (-o FILE)");
  const validate::ParseHints hints = log_hints(args);
  validate::FitOptions opt;
  opt.split_identification = args.has("--split-fit");
  opt.nccl_eras = args.has("--nccl-eras");
  if (args.has("--iterations")) {
    long long n = parse_int(args.get("--iterations"), "--iterations");
    if (n < 0 || n > 1000) throw InputError("--iterations", "an integer in 0..1000");
    opt.max_iterations = static_cast<int>(n);
  }
  models::Calibration start =
      args.has("--start") ? models::load_calibration(args.get("--start")) : models::default_calibration();
  auto ms = validate::load_all(args.positional(), hints);
  auto cases = validate::make_cases(ms, args.get("--topology"), args.params());
  if (args.has("--min-bytes") || args.has("--max-bytes")) {
    const std::uint64_t lo = args.has("--min-bytes") ? parse_size(args.get("--min-bytes"), "--min-bytes") : 0;
    const std::uint64_t hi = args.has("--max-bytes") ? parse_size(args.get("--max-bytes"), "--max-bytes")
                                                     : std::numeric_limits<std::uint64_t>::max();
    if (lo > hi) throw InputError("--max-bytes", "must be >= --min-bytes");
    validate::restrict_sizes(cases, lo, hi);
  }
  validate::FitResult fr = validate::fit_calibration(cases, start, opt);
  fr.calib.name = args.get("--name", "fitted");
  // NCCL latencies are identified from runs with one GPU per host thread only (validate/calibrate.cpp).
  if (std::all_of(cases.begin(), cases.end(), [](const validate::Case& c) { return c.m.gpus_per_thread > 1; }))
    std::cerr << "fabricsim calibrate: note: every run drives several GPUs from one host thread (nccl-tests -g N > 1), "
                 "so NCCL's latencies keep their start values; measure with one process per GPU (-g 1) to fit them "
                 "(docs/validation.md)\n";
  std::ostringstream src;
  src << "fabricsim calibrate (robust Huber fit on ln time, docs/validation.md) from " << start.name << " to:";
  for (const auto& m : ms) src << " " << m.source;
  fr.calib.source = src.str();

  std::ostringstream o;
  o << "# fabricsim calibrate: " << cases.size() << " runs, " << fr.residuals.size() << " rows, " << fr.iterations
    << " iterations, " << fr.simulations << " simulations\n";
  o << "# objective (Huber, delta " << opt.huber_delta << " on ln time): " << fr.start_objective << " -> "
    << fr.final_objective << "\n";
  o << "# parameter                         start            fitted\n";
  for (const auto& p : fr.params) {
    char b[160];
    std::snprintf(b, sizeof b, "  %-28s %14.6g %17.6g\n", p.name.c_str(), p.start, p.fitted);
    o << b;
  }
  o << "# residuals at the fit (busbw error = t_meas/t_sim - 1):\n";
  o << "#        size   meas_time   sim_time   error  source\n";
  std::vector<validate::LogCompare> logs(1);
  for (const auto& r : fr.residuals) {
    double err = r.measured_s / r.simulated_s - 1;
    char b[400];
    std::snprintf(b, sizeof b, "%13llu %11.2f %10.2f %7.1f  %s\n", static_cast<unsigned long long>(r.size_bytes),
                  r.measured_s * 1e6, r.simulated_s * 1e6, err * 100, r.source.c_str());
    o << b;
    validate::PointCompare pc;
    pc.size_bytes = r.size_bytes;
    pc.busbw_error = err;
    logs[0].points.push_back(pc);
  }
  auto sum = validate::summarize(logs);
  o << "# in-sample |busbw error|: >= 1 MiB median " << pct(sum.large.median) << ", p90 " << pct(sum.large.p90)
    << "; < 1 MiB median " << pct(sum.small.median) << ", p90 " << pct(sum.small.p90) << "\n";

  Json cj = models::calibration_to_json(fr.calib);
  std::string cal_text = cj.dump(1) + "\n";
  std::string json_text;
  if (args.has("--json")) {
    Json params = Json::array();
    for (const auto& p : fr.params) params.push_back({{"name", p.name}, {"start", p.start}, {"fitted", p.fitted}});
    Json rows = Json::array();
    for (const auto& r : fr.residuals)
      rows.push_back({{"source", r.source}, {"size_bytes", r.size_bytes}, {"measured_time_s", r.measured_s},
                      {"simulated_time_s", r.simulated_s}, {"log_residual", r.log_residual}});
    Json doc = {{"schema", "fabricsim.calibration_fit/1"},
                {"huber_delta", opt.huber_delta},
                {"iterations", fr.iterations},
                {"start_objective", fr.start_objective},
                {"final_objective", fr.final_objective},
                {"parameters", params},
                {"residuals", rows}};
    json_text = doc.dump(1) + "\n";
  }
  write_file_atomic(args.get("--output"), cal_text);
  if (args.has("--json")) write_file_atomic(args.get("--json"), json_text);
  std::cout << o.str();
  return 0;
}

}  // namespace fabricsim::cli
