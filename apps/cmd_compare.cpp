// fabricsim compare A.json B.json [...]: results side by side with the step-time deltas and where they come
// from (replay/outputs_compare.hpp). The app only parses and prints.
#include <iostream>

#include "apps/cli.hpp"
#include "replay/outputs_compare.hpp"
#include "sim/base/error.hpp"

namespace fabricsim::cli {

int cmd_compare(int argc, char** argv) {
  Args args("compare", "RESULT... (result JSON from `run --json`, or sweep CSV)",
            "Puts several results side by side: GPUs, step time, tokens/s, MFU, the step-time breakdown and the\n"
            "link classes' bytes and utilisation. Deltas are against the first result; for each other result the\n"
            "step-time difference is split by breakdown category (largest first) and the link classes that\n"
            "changed are listed. A sweep CSV contributes one column per ok row (no link figures: the CSV has none).");
  if (!args.parse(argc, argv)) return 0;
  if (args.positional().empty()) throw InputError("fabricsim compare", "expected at least two results (or one sweep CSV with two ok rows)");
  std::vector<sim::CompareColumn> cols;
  for (const auto& p : args.positional())
    for (auto& c : sim::load_compare_input(p)) cols.push_back(std::move(c));
  if (cols.size() < 2)
    throw InputError(args.positional().front(), "only one result to compare: give two or more result files, or a sweep CSV with two ok rows");
  std::cout << sim::compare_text(cols);
  return 0;
}

}  // namespace fabricsim::cli
