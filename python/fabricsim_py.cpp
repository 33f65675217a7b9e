// The `fabricsim` Python module: the simulator's library behind three calls that take and return plain
// Python data (dicts, lists, strings, numbers), for notebooks and sweeps written in Python.
//
//   fabricsim.run(scenario=None, comm_model="") -> dict        one training step (the result JSON of
//                                                             `fabricsim run --json`); None = the flagship
//   fabricsim.coll(topology, op="all_reduce", minbytes="32M", ..., faults=[...], params={}) -> dict
//                                                             a collective over a size sweep (the JSON of
//                                                             `fabricsim coll --json`, plus "table": its text)
//   fabricsim.topology(name, params={}) -> dict               the summary of `fabricsim topo --json`
//   fabricsim.default_scenario() -> dict                      the flagship scenario, to edit and run
//
// Bad input raises fabricsim.InputError (a ValueError) with the CLI's message. The simulation runs without
// the GIL, so threads can run several at once.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <map>
#include <string>

#include "sim/base/error.hpp"
#include "sim/base/json_reader.hpp"
#include "replay/coll_sweep.hpp"
#include "replay/outputs.hpp"
#include "replay/run_scenario.hpp"
#include "topologies/io.hpp"
#include "workloads/cluster.hpp"
#include "workloads/scenario.hpp"

namespace py = pybind11;
using fabricsim::Json;

namespace {

// Python data <-> JSON through Python's own json module (exact for the types JSON has).
Json to_json(const py::object& o, const std::string& what) {
  py::module_ json = py::module_::import("json");
  std::string text;
  try {
    text = py::cast<std::string>(json.attr("dumps")(o, py::arg("allow_nan") = false));
  } catch (const py::error_already_set& e) {
    throw fabricsim::InputError(what, std::string("expected JSON-like data (dict, list, str, number, bool, None): ") +
                                          e.what());
  }
  return Json::parse(text);
}

py::object from_json(const Json& j) {
  return py::module_::import("json").attr("loads")(j.dump());
}

std::map<std::string, std::string> string_map(const py::dict& d, const std::string& what) {
  std::map<std::string, std::string> m;
  for (auto item : d) {
    const std::string k = py::str(item.first);
    const py::handle v = item.second;
    if (py::isinstance<py::bool_>(v)) m[k] = v.cast<bool>() ? "true" : "false";
    else if (py::isinstance<py::str>(v) || py::isinstance<py::int_>(v) || py::isinstance<py::float_>(v))
      m[k] = py::str(v);
    else throw fabricsim::InputError(what + " '" + k + "'", "expected a string or a number");
  }
  return m;
}

py::object run(const py::object& scenario, const std::string& comm_model) {
  Json doc = scenario.is_none() ? fabricsim::workloads::default_scenario_json() : to_json(scenario, "scenario");
  fabricsim::sim::ScenarioRun r;
  {
    py::gil_scoped_release nogil;
    fabricsim::workloads::Scenario sc = fabricsim::workloads::scenario_from_json(doc, "<python>");
    fabricsim::sim::ScenarioRunOptions opt;
    opt.comm_model = comm_model;
    if (!comm_model.empty() && !fabricsim::workloads::is_comm_model(comm_model))
      throw fabricsim::InputError("comm_model", std::string("expected ") + fabricsim::workloads::comm_model_help());
    r = fabricsim::sim::run_scenario(sc, opt);
  }
  return from_json(fabricsim::sim::result_json(r.result, 10));
}

py::object coll(const std::string& topology, const py::dict& params, const py::kwargs& kw) {
  // faults=[...]: what `fabricsim coll --fault` takes, each a string in its short form or a dict in a scenario's
  // faults[] vocabulary (workloads/cluster.hpp reads both).
  std::vector<fabricsim::workloads::FaultSpec> faults;
  py::dict rest;
  for (auto item : kw) {
    const std::string k = py::str(item.first);
    if (k != "faults") {
      rest[item.first] = item.second;
      continue;
    }
    if (!py::isinstance<py::list>(item.second) && !py::isinstance<py::tuple>(item.second))
      throw fabricsim::InputError("coll option 'faults'", "a list of fault strings or dicts");
    int i = 0;
    for (auto f : item.second) {
      const std::string where = "faults[" + std::to_string(i++) + "]";
      if (py::isinstance<py::str>(f)) faults.push_back(fabricsim::workloads::parse_fault_text(py::str(f), where));
      else if (py::isinstance<py::dict>(f))
        faults.push_back(fabricsim::workloads::parse_fault(to_json(py::reinterpret_borrow<py::object>(f), where),
                                                           fabricsim::JsonPath{"<python>", "/faults"}.index(i - 1)));
      else throw fabricsim::InputError(where, "a fault string (link=A,B:50%) or dict");
    }
  }
  std::map<std::string, std::string> opts = string_map(rest, "coll option");
  // Python names use underscores where the flags use dashes (gpus_per_thread -> gpus-per-thread).
  std::map<std::string, std::string> flags;
  for (auto& [k, v] : opts) {
    std::string f = k;
    for (auto& c : f)
      if (c == '_') c = '-';
    flags[f] = v;
  }
  flags["topology"] = topology;
  fabricsim::sim::CollSweep sweep;
  {
    const auto p = string_map(params, "param");
    py::gil_scoped_release nogil;
    fabricsim::sim::CollSweepRequest req = fabricsim::sim::coll_request(flags, p);
    req.faults = std::move(faults);
    sweep = fabricsim::sim::run_coll_sweep(req);
  }
  Json doc = sweep.doc;
  doc["table"] = sweep.text;
  return from_json(doc);
}

py::object topology(const std::string& name, const py::dict& params) {
  Json j;
  {
    const auto p = string_map(params, "param");
    py::gil_scoped_release nogil;
    fabricsim::topo::Topology t = fabricsim::topo::load_topology(name, p);
    j = fabricsim::topo::summary_json(t, fabricsim::topo::summarize(t));
  }
  return from_json(j);
}

}  // namespace

PYBIND11_MODULE(fabricsim, m) {
  m.doc() = "fabricsim: GPU-cluster interconnect and training-step simulator (docs/python.md)";
  static py::exception<fabricsim::InputError> input_error(m, "InputError", PyExc_ValueError);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const fabricsim::InputError& e) {
      input_error(e.what());
    } catch (const Json::exception& e) {
      input_error((std::string("invalid JSON: ") + e.what()).c_str());
    }
  });
  m.def("run", &run, py::arg("scenario") = py::none(), py::arg("comm_model") = "",
        "One training step of a scenario (a dict in the scenario format of docs/workloads.md; None = the "
        "built-in flagship). Returns the result JSON of `fabricsim run --json` as a dict.");
  m.def("coll", &coll, py::arg("topology"), py::arg("params") = py::dict(),
        "A collective over a size sweep, as `fabricsim coll`: keyword options are coll's flags with '_' for '-' "
        "(op, minbytes, maxbytes, stepfactor, ngpus, comm, root, algo, proto, channels, engine, fidelity, "
        "calibration, datatype, redop, iters, gpus_per_thread, batch_tolerance, pxn). Returns the "
        "collective-results JSON as a dict, with the printed table under 'table'.");
  m.def("topology", &topology, py::arg("name"), py::arg("params") = py::dict(),
        "Summary of a topology preset or JSON file (counts, per-GPU bandwidths, bisection, diameter).");
  m.def("default_scenario", [] { return from_json(fabricsim::workloads::default_scenario_json()); },
        "The flagship scenario as a dict (GPT-3 175B on 1024 A100), to edit and pass to run().");
}
