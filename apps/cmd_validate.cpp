// fabricsim validate: simulate measured collective runs and report the error (validate/report.hpp).
#include <iostream>
#include <optional>

#include "apps/cli.hpp"
#include "apps/log_hints.hpp"
#include <map>
#include <set>

#include "models/calibration.hpp"
#include "models/system.hpp"
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
  args.flag({"--calibration", "", "auto|default|shipped:NAME|FILE",
             "network calibration, resolved per log's system as every command does (models/system.hpp): auto = the "
             "shipped file fitted on matching hardware (in-sample for the logs it was fitted on: --loo gives the "
             "held-out error); with --loo the fit's starting point",
             "auto; with --loo default (a start fitted on the held-out log would leak it)"});
  args.flag({"--loo", "", "", "leave-one-out: fit without each log, then predict it", ""});
  args.flag({"--split-fit", "", "", "with --loo: fit as `fabricsim calibrate --split-fit` (docs/validation.md)", ""});
  args.flag({"--nccl-eras", "", "", "with --loo: fit as `fabricsim calibrate --nccl-eras` (docs/validation.md)", ""});
  args.flag({"--loo-by-system", "", "", "with --loo: hold out all multi-host logs of one system (server, fabric, NICs) together", ""});
  args.flag({"--json", "", "FILE", "also write the report as JSON", ""});
  args.flag({"--svg", "", "FILE", "also write an SVG plot of measured vs simulated busbw", ""});
  log_hint_flags(args);
  args.flag({"--quiet", "-q", "", "print only the summary", ""});
  args.list_flag(Args::kTopologies | Args::kCalibrations);
  if (!args.parse(argc, argv)) return 0;
  // Output paths are checked before simulating (minutes with --loo), so a bad one fails at once.
  args.check_output_flags({"--json", "--svg"});
  for (const char* f : {"--split-fit", "--nccl-eras", "--loo-by-system"})
    if (args.has(f) && !args.has("--loo")) throw InputError(f, "only applies with --loo (a fit); without it nothing is fitted");
  const validate::ParseHints hints = log_hints(args);
  auto ms = validate::load_all(args.positional(), hints);
  auto cases = validate::make_cases(ms, args.get("--topology"), args.params());
  const std::string spec = args.has("--calibration") ? args.get("--calibration") : args.has("--loo") ? "default" : "auto";
  validate::Report rep;
  if (args.has("--loo")) {
    // The start is one calibration for every fold: resolved on the first log's system.
    if (cases.empty()) throw InputError("fabricsim validate", "no measured runs to validate");
    const models::CalibrationRef ref = models::resolve_calibration_ref(spec, cases.front().sys->system().topology());
    validate::FitOptions o;
    o.split_identification = args.has("--split-fit");
    o.nccl_eras = args.has("--nccl-eras");
    o.loo_by_system = args.has("--loo-by-system");
    // --loo fits once per log (minutes): progress on stderr, a line every few seconds when not a terminal.
    sim::Progress bar("validate --loo fits", static_cast<double>(validate::loo_units(cases, o.loo_by_system)), args.has("--quiet"));
    rep = validate::leave_one_out(cases, models::load_calibration_ref(ref), o, nullptr, &bar);
    rep.title += ", every fit starting from calibration: " + ref.label();
  } else {
    // One calibration per log, resolved by the policy every command uses on that log's system; each is named
    // in the report by its label ("h100 (fitted, validate/calibrations/h100.json)").
    std::map<std::string, models::Calibration> loaded;
    std::vector<const models::Calibration*> of_case;
    std::set<std::string> labels;
    for (const auto& c : cases) {
      const models::CalibrationRef ref = models::resolve_calibration_ref(spec, c.sys->system().topology());
      auto it = loaded.find(ref.label());
      if (it == loaded.end()) {
        models::Calibration cal = models::load_calibration_ref(ref);
        models::CalibrationRef named = ref;
        if (ref.kind == "file") named.name = cal.name;
        cal.name = named.label();
        it = loaded.emplace(ref.label(), std::move(cal)).first;
      }
      labels.insert(it->second.name);
      of_case.push_back(&it->second);
    }
    rep = validate::compare(cases, [&](std::size_t i) -> const models::Calibration& { return *of_case[i]; },
                            labels.size() == 1 ? "calibration " + *labels.begin()
                                               : "calibration " + spec + " (per log, named with each log)");
  }
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
