// fabricsim validate: simulate measured collective runs and report the error (validate/report.hpp).
#include <iostream>

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

int cmd_validate(int argc, char** argv) {
  Args args("validate", "[options] LOGS...",
            "Simulates every measured run (nccl-tests text, .meta.json sidecar or collective-results JSON) on the\n"
            "matching topology and prints, per log and size, measured vs simulated time and busbw and the busbw\n"
            "error, then the median and 90th percentile absolute error for sizes >= 1 MiB and below.\n"
            "Broadcast and reduce are simulated as the measurement's loop of back-to-back calls (docs/validation.md).\n"
            "--loo refits the calibration without each log (on the other logs of its hardware family, or on all\n"
            "others when it is alone) and predicts it: the honest accuracy of calibrate + simulate.");
  args.topology_flags();
  args.flag({"--calibration", "", "FILE", "calibration JSON (with --loo: the fit's starting point)", "built-in defaults"});
  args.flag({"--loo", "", "", "leave-one-out: fit without each log, then predict it", ""});
  args.flag({"--split-fit", "", "", "with --loo: fit as `fabricsim calibrate --split-fit` (docs/validation.md)", ""});
  args.flag({"--nccl-eras", "", "", "with --loo: fit as `fabricsim calibrate --nccl-eras` (docs/validation.md)", ""});
  args.flag({"--loo-by-system", "", "", "with --loo: hold out all multi-host logs of one system (server, fabric, NICs) together", ""});
  args.flag({"--json", "", "FILE", "also write the report as JSON", ""});
  args.flag({"--svg", "", "FILE", "also write an SVG plot of measured vs simulated busbw", ""});
  log_hint_flags(args);
  args.flag({"--quiet", "-q", "", "print only the summary", ""});
  if (!args.parse(argc, argv)) return 0;
  // Output paths are checked before simulating (minutes with --loo), so a bad one fails at once.
  args.check_output_flags({"--json", "--svg"});
  for (const char* f : {"--split-fit", "--nccl-eras", "--loo-by-system"})
    if (args.has(f) && !args.has("--loo")) throw InputError(f, "only applies with --loo (a fit); without it nothing is fitted");
  const validate::ParseHints hints = log_hints(args);
  models::Calibration calib = args.has("--calibration") ? models::load_calibration(args.get("--calibration"))
                                                        : models::default_calibration();
  auto ms = validate::load_all(args.positional(), hints);
  auto cases = validate::make_cases(ms, args.get("--topology"), args.params());
  validate::Report rep =
      args.has("--loo")
          ? validate::leave_one_out(cases, calib, [&] {
              validate::FitOptions o;
              o.split_identification = args.has("--split-fit");
              o.nccl_eras = args.has("--nccl-eras");
              o.loo_by_system = args.has("--loo-by-system");
              return o;
            }())
          : validate::compare(cases, [&](std::size_t) -> const models::Calibration& { return calib; },
                              "calibration " + calib.name);
  std::string text = validate::report_text(rep);
  std::string json_text = args.has("--json") ? validate::report_json(rep).dump(1) + "\n" : "";
  std::string svg = args.has("--svg") ? validate::report_svg(rep) : "";
  if (args.has("--json")) write_file_atomic(args.get("--json"), json_text);
  if (args.has("--svg")) write_file_atomic(args.get("--svg"), svg);
  if (args.has("--quiet")) {
    auto pos = text.find("# summary");
    std::cout << (pos == std::string::npos ? text : text.substr(pos));
  } else {
    std::cout << text;
  }
  return 0;
}

}  // namespace fabricsim::cli
