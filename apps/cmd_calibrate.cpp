// fabricsim calibrate: fit the network model's calibration to nccl-tests measurements (validate/calibrate.hpp).
#include <algorithm>
#include <cmath>
#include <map>
#include <cstdio>
#include <iostream>
#include <limits>
#include <sstream>

#include "apps/cli.hpp"
#include "apps/log_hints.hpp"
#include "models/calibration.hpp"
#include "models/calibration_params.hpp"
#include "models/system.hpp"
#include "models/compute_calibration.hpp"
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

namespace {
// `fabricsim calibrate --compute`: the per-kernel compute model (models/compute_calibration.hpp).
int calibrate_compute(const Args& args) {
  if (!args.positional().empty())
    throw InputError("--compute", "takes kernel measurements only; nccl-tests LOGS are calibrated without --compute");
  if (!args.has("--output")) throw InputError("--output", "the compute calibration file to write (-o FILE)");
  const std::string in = args.get("--compute");
  const models::KernelMeasurements m = models::load_kernel_measurements(in);
  models::KernelMeasurements check;
  const bool has_check = args.has("--compute-check");
  if (has_check) check = models::load_kernel_measurements(args.get("--compute-check"));
  // --start: a compute calibration (shipped name or file) whose values the parameters without rows keep.
  const models::ComputeCalibration start = args.has("--start")
                                               ? models::compute_calibration_named(args.get("--start"), "--start")
                                               : models::default_fit_start();
  models::ComputeCalibration c = models::fit_compute_calibration(m, start);
  c.source = "fabricsim calibrate --compute " + in + " (ln-time least squares, models/compute_calibration.cpp): " +
             std::to_string(m.rows.size()) + " kernels measured on " + m.device + " (" + m.source + ")" +
             (args.has("--start") ? "; kinds without rows from " + args.get("--start") : std::string());
  std::ostringstream o;
  o << "# fabricsim calibrate --compute: " << m.rows.size() << " kernels on " << m.device << " (preset " << m.gpu
    << ", " << c.sm_count << " SMs)\n";
  // In-sample errors are labelled as such; held-out errors come from --held-out / --compute-check.
  std::map<std::string, std::vector<double>> fitted;
  const models::GpuSpec gpu = [&] {
    models::GpuSpec g = models::gpu_spec(m.gpu);
    g.sm_count = c.sm_count;
    return g;
  }();
  for (const auto& r : m.rows)
    fitted[models::error_class(r.kernel)].push_back(
        std::fabs(models::calibrated_kernel_time_s(c, gpu, r.kernel) / r.time_s - 1));
  o << "# in-sample |error| per class (fitted rows, NOT held out):\n";
  for (auto& [cls, v] : fitted) {
    std::sort(v.begin(), v.end());
    char b[160];
    std::snprintf(b, sizeof b, "#   %-22s %4zu rows  median %5.1f %%  max %5.1f %%\n", cls.c_str(), v.size(),
                  100 * v[v.size() / 2], 100 * v.back());
    o << b;
  }
  if (args.has("--held-out") || has_check) {
    auto rows = models::compute_held_out(m, has_check ? &check : nullptr);
    o << "# held-out |error| (" << (args.has("--held-out") ? "leave-one-group-out" : "")
      << (has_check ? std::string(args.has("--held-out") ? "; " : "") + "fit on all, predict " + args.get("--compute-check") : "")
      << "):\n";
    if (!args.has("--held-out")) {
      std::vector<models::HeldOutRow> keep;
      for (const auto& r : rows)
        if (r.split.rfind("leave", 0) != 0) keep.push_back(r);
      rows = keep;
    }
    o << models::held_out_table(rows);
  }
  write_file_atomic(args.get("--output"), models::compute_calibration_dump(c));
  std::cout << o.str();
  return 0;
}
}  // namespace

int cmd_calibrate(int argc, char** argv) {
  Args args("calibrate", "[options] LOGS... -o CALIB.json | --compute FILE|DIR -o COMPUTE_CALIB.json",
            "Fits the collective model's calibration (per-protocol latencies, NVLink/network/NVLS/tree efficiencies,\n"
            "the per-channel LL rate)\n"
            "to measured nccl-tests times by robust (Huber) least squares on log-time residuals, prints the fitted\n"
            "parameters and residuals, and writes a calibration file for --calibration. LOGS are nccl-tests text\n"
            "outputs, their .meta.json sidecars (tests/data/nccl-tests), or collective-results JSON files.\n"
            "Without --topology each log is mapped to a preset from its GPU model and host count\n"
            "(docs/validation.md).\n"
            "With --compute, fits the per-kernel compute model instead (docs/calibration.md \"Compute kernels\"):\n"
            "FILE is a fabricsim.kernel_measurements/1 JSON (fabricsim-kernel-bench), DIR a folder of kernel CSVs\n"
            "(tests/data/hardware/h200-kernels format); -o writes a fabricsim.compute_calibration/1 file that a\n"
            "scenario names with \"compute\": {\"calibration\": FILE}. Fitted: GEMM efficiency, K-loop half point and\n"
            "fixed time per precision; grouped-GEMM efficiency, weight-streaming rate and fixed time; attention\n"
            "efficiency, sequence half point and fixed time per implementation and pass; HBM fraction per\n"
            "memory-bound kind.");
  args.topology_flags();
  args.flag({"--output", "-o", "FILE", "calibration JSON to write", ""});
  args.flag({"--start", "", "default|auto|shipped:NAME|FILE", "calibration to start from, resolved as every command's --calibration (with --compute: a compute calibration name or file; parameters without measured rows keep its values)", "default (built-in cited defaults)"});
  args.flag({"--name", "", "NAME", "name stored in the calibration file", "fitted"});
  args.flag({"--json", "", "FILE", "also write the fitted parameters and per-row residuals as JSON", ""});
  log_hint_flags(args);
  args.flag({"--iterations", "", "N", "Gauss-Newton iterations at most", "12"});
  args.flag({"--min-bytes", "", "SIZE", "fit only rows of at least this size", "all rows"});
  args.flag({"--max-bytes", "", "SIZE", "fit only rows of at most this size", "all rows"});
  args.flag({"--split-fit", "", "", "also fit NCCL-generation tables and LL/LL128 efficiencies, each parameter from the runs that show it (docs/validation.md)", ""});
  args.flag({"--compute", "", "FILE|DIR", "fit the per-kernel compute model on kernel measurements (see above)", ""});
  args.flag({"--held-out", "", "", "with --compute: also print leave-one-group-out errors (GEMM/grouped: per model; attention: per head config)", ""});
  args.flag({"--compute-check", "", "FILE|DIR", "with --compute: print the errors of the fit predicting these measurements (another GPU)", ""});
  args.flag({"--nccl-eras", "", "", "runs of NCCL 2.8-2.17 use that generation's tuning table with their own latency multipliers (docs/validation.md)", ""});
  args.list_flag(Args::kTopologies | Args::kCalibrations | Args::kCompute);
  args.flag({"--list-params", "", "", "print the calibration parameters (name, unit, range, default, source, reader) and exit", ""});
  if (!args.parse(argc, argv)) return 0;
  if (args.has("--list-params")) {
    std::cout << models::calibration_params_text();
    return 0;
  }
  if (args.has("--compute")) {
    args.check_output_flags({"--output"});
    return calibrate_compute(args);
  }
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
  auto ms = validate::load_all(args.positional(), hints);
  auto cases = validate::make_cases(ms, args.get("--topology"), args.params());
  // The start, resolved like every command's --calibration (models/system.hpp) on the first run's system;
  // by default the built-in cited values, so that a fit never starts from an earlier fit of the same logs.
  if (cases.empty()) throw InputError("fabricsim calibrate", "no measured runs to fit");
  const models::CalibrationRef start_ref =
      models::resolve_calibration_ref(args.has("--start") ? args.get("--start") : "default", cases.front().sys->system().topology());
  models::Calibration start = models::load_calibration_ref(start_ref);
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
  src << "fabricsim calibrate (robust Huber fit on ln time, docs/validation.md) from " << start_ref.label() << " to:";
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
