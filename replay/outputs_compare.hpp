#pragma once
// `fabricsim compare`: several results side by side -- the answer to a what-if question -- with the
// difference in step time of each against the first (the baseline) and where it comes from: per breakdown
// category (compute, exposed communication by category, bubble, idle) and per link class (bytes carried and
// mean utilisation). Inputs: result JSON files (`fabricsim run --json`, docs/result.schema.json) and sweep
// CSV files (`fabricsim sweep`, one column per ok row; sweep CSVs carry no link figures).
#include <map>
#include <string>
#include <vector>

namespace fabricsim::sim {

struct CompareLinkClass {
  int directions = 0;
  double bytes = 0;
  double util_avg_run_mean = 0;  // 0..1
};

struct CompareColumn {
  std::string label;  // file name, or "file.csv: point label / axis values" for a sweep row
  int gpus = 0;
  double iteration_s = 0, samples_per_s = 0, tokens_per_s = 0, tflops_per_gpu = 0;
  double mfu = 0;  // 0: not known
  // Breakdown in a fixed order: compute, exposed <category>..., bubble, idle (seconds per step).
  std::vector<std::pair<std::string, double>> breakdown;
  bool has_links = false;
  std::map<std::string, CompareLinkClass> link_classes;  // by class name (outputs.hpp link_class)
};

// Reads one input: a result JSON (one column) or a sweep CSV (one column per ok row; failed rows are
// skipped, and a CSV without ok rows is an error). Bad input -> InputError naming the file and place.
std::vector<CompareColumn> load_compare_input(const std::string& path);

// The side-by-side table, deltas against columns[0], and for each other column the step-time delta split
// by category (largest first) and the link classes' changes.
std::string compare_text(const std::vector<CompareColumn>& columns);

}  // namespace fabricsim::sim
