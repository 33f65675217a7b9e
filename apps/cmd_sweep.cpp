// fabricsim sweep sweep.json: run a grid (or list) of scenario variants, one CSV row each (docs/outputs.md).
// Points run in parallel threads (one simulation per thread); under `mpirun -np N` the points are dealt
// round-robin to the ranks and gathered on rank 0, which writes the CSV. Rows are ordered by point index, so
// the file is byte-identical whatever the thread or rank count. Failed points are rows with status "failed"
// (and a line on stderr); a resumed sweep keeps the rows already in the output file and runs the rest.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <set>
#include <thread>

#include "apps/cli.hpp"
#include "models/system.hpp"
#include "sim/base/error.hpp"
#include "sim/base/input_file.hpp"
#include "sim/base/units.hpp"
#include "replay/outputs_sweep.hpp"
#include "replay/run_scenario.hpp"
#include "workloads/params.hpp"
#include "workloads/scenario.hpp"

#ifdef FABRICSIM_HAVE_MPI
#include <mpi.h>
#endif

namespace fabricsim::cli {

namespace {

// MPI is used only when the process was started by an MPI launcher (mpirun sets these variables).
[[maybe_unused]] bool launched_by_mpi() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"})
    if (std::getenv(v)) return true;
  return false;
}

struct MpiSession {
  int rank = 0, size = 1;
  bool active = false;
  MpiSession() {
#ifdef FABRICSIM_HAVE_MPI
    if (launched_by_mpi()) {
      MPI_Init(nullptr, nullptr);
      MPI_Comm_rank(MPI_COMM_WORLD, &rank);
      MPI_Comm_size(MPI_COMM_WORLD, &size);
      active = true;
    }
#endif
  }
  ~MpiSession() {
#ifdef FABRICSIM_HAVE_MPI
    if (active) MPI_Finalize();
#endif
  }
  void barrier() const {
#ifdef FABRICSIM_HAVE_MPI
    if (active) MPI_Barrier(MPI_COMM_WORLD);
#endif
  }
  // Concatenates every rank's text on rank 0 (rank order); other ranks get "".
  std::string gather(const std::string& mine) const {
#ifdef FABRICSIM_HAVE_MPI
    if (active) {
      int n = static_cast<int>(mine.size());
      std::vector<int> sizes(static_cast<std::size_t>(size)), displs(static_cast<std::size_t>(size));
      MPI_Gather(&n, 1, MPI_INT, sizes.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
      std::string all;
      if (rank == 0) {
        int total = 0;
        for (int i = 0; i < size; ++i) {
          displs[static_cast<std::size_t>(i)] = total;
          total += sizes[static_cast<std::size_t>(i)];
        }
        all.resize(static_cast<std::size_t>(total));
      }
      MPI_Gatherv(mine.data(), n, MPI_CHAR, rank == 0 ? all.data() : nullptr, sizes.data(), displs.data(), MPI_CHAR,
                  0, MPI_COMM_WORLD);
      return all;
    }
#endif
    return mine;
  }
};

std::string read_text(const std::string& path) { return read_input_file(path); }

// --points: "0,3,5-7" (point indices as in the CSV's first column; ranges inclusive), checked against the sweep.
std::set<std::size_t> parse_point_selection(const std::string& text, std::size_t npoints) {
  std::set<std::size_t> out;
  const std::string expect = "expected point indices and ranges such as \"0,3,5-7\" (0.." + std::to_string(npoints - 1) + ")";
  std::size_t a = 0;
  while (a <= text.size()) {
    std::size_t b = text.find(',', a);
    if (b == std::string::npos) b = text.size();
    const std::string item = text.substr(a, b - a);
    const std::size_t dash = item.find('-', 1);
    auto num = [&](const std::string& t) -> std::size_t {
      if (t.empty() || t.find_first_not_of("0123456789") != std::string::npos || t.size() > 9)
        throw InputError("--points", expect + ", got \"" + text + "\"");
      const std::size_t v = static_cast<std::size_t>(std::stoull(t));
      if (v >= npoints)
        throw InputError("--points", "point " + t + " does not exist: the sweep has " + std::to_string(npoints) +
                                         " points (0.." + std::to_string(npoints - 1) + ")");
      return v;
    };
    const std::size_t lo = num(dash == std::string::npos ? item : item.substr(0, dash));
    const std::size_t hi = dash == std::string::npos ? lo : num(item.substr(dash + 1));
    if (hi < lo) throw InputError("--points", "range " + item + " runs backwards; " + expect);
    for (std::size_t i = lo; i <= hi; ++i) out.insert(i);
    a = b + 1;
  }
  return out;
}

std::string inputs_text(const sim::SweepSpec& s, const sim::SweepPoint& p) {
  std::string o;
  for (std::size_t i = 0; i < p.inputs.size(); ++i) o += (i ? ", " : "") + s.input_columns[i] + "=" + p.inputs[i];
  return o;
}

}  // namespace

int cmd_sweep(int argc, char** argv) {
  Args args("sweep", "sweep.json [options]",
            "Run every point of a sweep (a grid or list of variations of one scenario; format in docs/outputs.md)\n"
            "in parallel and write one CSV row per point: the varied inputs, status, step time, breakdown and\n"
            "cost figures (GPU count, GPU-seconds per step). Failed points are rows with status \"failed\" and the\n"
            "error; layouts that need more GPU memory than the GPU has are rows with status \"does_not_fit\".\n"
            "If the output file exists, its rows are kept and only the missing points run (resume).\n"
            "Under `mpirun -np N fabricsim sweep ...` points are spread across the ranks; the CSV is identical.\n"
            "--points runs a subset (a quick look at a long sweep; later runs with other points add to the file).\n"
            "Exit status: 0 every point ok or does_not_fit, 1 some point failed, 2 bad input.");
  args.flag({"--output", "-o", "FILE", "CSV file (overrides the sweep's \"output\"; without either: stdout)", ""});
  args.flag({"--threads", "-j", "N", "worker threads per process (overrides \"threads\"; 0 = all cores)", ""});
  args.flag({"--comm-model", "", "MODEL", "shared (default), engine or analytic (overrides each scenario's comm_model)", ""});
  args.flag({"--points", "", "LIST", "run only these points: indices as in the CSV's first column, e.g. 0,3,5-7", ""});
  args.flag({"--quiet", "-q", "", "no progress bar", ""});
  args.list_flag(Args::kTopologies | Args::kCompute | Args::kModels);
  if (!args.parse(argc, argv)) return 0;
  MpiSession mpi;
  try {
    if (args.positional().size() != 1) throw InputError("fabricsim sweep", "expected exactly one sweep file");
    sim::SweepSpec spec = sim::load_sweep(args.positional()[0]);
    std::string output = args.has("--output") ? args.get("--output") : spec.output;
    if (!output.empty()) check_output_path(output, args.has("--output") ? "--output" : spec.file + ": /output");
    int threads = spec.threads;
    if (args.has("--threads")) {
      long long t = parse_int(args.get("--threads"), "--threads");
      if (t < 0 || t > 4096) throw InputError("--threads", "expected an integer between 0 (all cores) and 4096");
      threads = static_cast<int>(t);
    }
    if (threads == 0) {
      int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
      int local = 1;
      if (const char* l = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE")) local = std::max(1, std::atoi(l));
      threads = std::max(1, cores / (mpi.active ? local : 1));
    }
    std::set<std::size_t> selected;
    if (args.has("--points")) {
      if (spec.points.empty()) throw InputError("--points", spec.file + " has no points");
      selected = parse_point_selection(args.get("--points"), spec.points.size());
    }
    std::string comm_model = args.comm_model();

    if (!comm_model.empty()) spec.run_options = std::string("comm_model=") + comm_model;
    // Every point's scenario and generator parameters are read before the first point runs: a malformed
    // scenario, an unknown generator parameter or an ill-typed value in any point fails the sweep (exit 2)
    // with nothing simulated. What only that point's combination makes impossible (a TP size that does not
    // divide its GPUs, a topology that cannot be built) stays that point's failed row.
    {
      std::map<std::string, std::shared_ptr<models::System>> systems;  // points often share a system
      for (const sim::SweepPoint& pt : spec.points) {
        const std::size_t i = pt.index;
        const std::string at = spec.file + ": point " + std::to_string(i) + " (" + inputs_text(spec, pt) + ")";
        workloads::Scenario sc;
        try {
          sc = workloads::scenario_from_json(sim::point_scenario(spec, pt), spec.base_source);
        } catch (const InputError& e) {
          throw InputError(at, std::string(e.what()) + "; nothing was run");
        }
        try {
          const std::string key = Json{sc.topology, sc.topology_params, sc.calibration_file}.dump();
          auto it = systems.find(key);
          if (it == systems.end())
            it = systems.emplace(key, std::make_shared<models::System>(sim::scenario_system(sc))).first;
          sim::check_scenario_inputs(sc, *it->second);
        } catch (const workloads::ParamError& e) {
          throw InputError(at, std::string(e.what()) + "; nothing was run");
        } catch (const InputError&) {
          // That point's own failure: reported as its row when it runs.
        }
      }
    }
    // Resume: rows already in the output file (rows of another scenario or comm model run again).
    std::map<std::size_t, std::string> done;
    std::size_t stale = 0;
    if (!output.empty() && std::filesystem::exists(output))
      done = sim::read_done_rows(spec, read_text(output), output, &stale);
    mpi.barrier();  // every rank has read the file before rank 0 rewrites it
    if (mpi.rank == 0 && !output.empty()) write_file_atomic(output, sim::sweep_csv(spec, done));

    std::vector<std::size_t> todo;
    for (const auto& p : spec.points)
      if (!done.count(p.index) && (selected.empty() || selected.count(p.index))) todo.push_back(p.index);
    std::vector<std::size_t> mine;
    for (std::size_t k = 0; k < todo.size(); ++k)
      if (static_cast<int>(k % static_cast<std::size_t>(mpi.size)) == mpi.rank) mine.push_back(todo[k]);
    if (mpi.rank == 0 && !args.has("--quiet"))
      std::cerr << "fabricsim sweep: " << spec.points.size() << " points, " << done.size() << " already in "
                << (output.empty() ? std::string("<stdout>") : output) << ", " << todo.size()
                << (selected.empty() ? "" : " of the " + std::to_string(selected.size()) + " --points") << " to run on "
                << mpi.size << " process(es) x " << threads << " thread(s)\n";
    if (mpi.rank == 0 && stale > 0)  // said even with --quiet: results the user may have expected to keep
      std::cerr << "fabricsim sweep: " << stale << " row(s) of " << output
                << " came from a different scenario or --comm-model (input_hash differs) and run again\n";

    sim::ScenarioRunner runner = [comm_model](const Json& scen, const std::string& source) {
      workloads::Scenario sc = workloads::scenario_from_json(scen, source);
      sim::ScenarioRunOptions o;
      o.comm_model = comm_model;
      return sim::run_scenario(sc, o).result;
    };
    bool journal_failed = false;
    sim::SweepRunOptions ro;
    ro.threads = threads;
    ro.progress = mpi.rank == 0 && !args.has("--quiet");
    ro.on_row = [&](std::size_t index, const std::string& row, bool ok, const std::string& error) {
      if (!ok)
        std::cerr << "fabricsim sweep: point " << index << " (" << inputs_text(spec, spec.points[index])
                  << (sim::sweep_row_status(spec, row) == "does_not_fit" ? ") does not fit: " : ") failed: ") << error
                  << "\n";
      if (mpi.rank == 0 && !output.empty() && !journal_failed) {
        // Journal for resume (one append per finished row; a kill mid-append leaves a last line without its
        // newline, which the resume ignores); the final file is rewritten in order, atomically.
        std::ofstream f(output, std::ios::app | std::ios::binary);
        f << row;
        f.flush();
        if (!f) {  // disk full or file gone: keep running (rows are kept in memory), say so once
          journal_failed = true;
          std::cerr << "fabricsim sweep: warning: cannot append to " << output
                    << "; finished rows are kept in memory only until the end (an interrupted run would redo them)\n";
        }
      }
    };
    auto rows = sim::run_sweep_points(spec, mine, runner, ro);

    std::string my_text;
    for (const auto& [i, r] : rows) my_text += r;
    std::string all = mpi.gather(my_text);
    if (mpi.rank != 0) return 0;
    std::istringstream in(all);
    std::string line;
    while (std::getline(in, line)) {
      std::size_t idx = static_cast<std::size_t>(std::stoull(line.substr(0, line.find(','))));
      done[idx] = line + "\n";
    }
    std::size_t failed = 0, no_fit = 0;
    for (const auto& [i, r] : done) {
      const std::string st = sim::sweep_row_status(spec, r);
      if (st == "does_not_fit") ++no_fit;
      else if (st != "ok") ++failed;
    }
    std::string csv = sim::sweep_csv(spec, done);
    if (output.empty())
      std::cout << csv;
    else
      write_file_atomic(output, csv);
    if (!args.has("--quiet"))
      std::cerr << "fabricsim sweep: " << done.size() << " rows (" << done.size() - failed - no_fit << " ok, " << no_fit
                << " do not fit in GPU memory, " << failed << " failed)"
                << (output.empty() ? std::string() : " -> " + output) << "\n";
    return failed ? 1 : 0;
  } catch (const InputError& e) {
    if (mpi.rank != 0) return 2;  // every rank read the same input; rank 0 reports it
#ifdef FABRICSIM_HAVE_MPI
    if (mpi.active && mpi.size > 1) {  // other ranks may be waiting in a collective: end them all
      std::cerr << "fabricsim sweep: error: " << e.what() << "\n";
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
#endif
    throw;
  }
}

}  // namespace fabricsim::cli
