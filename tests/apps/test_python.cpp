// The Python module (python/fabricsim_py.cpp, docs/python.md): the same numbers as the CLI, errors as
// fabricsim.InputError, and the notebook-style example. Compiled where CMake built the module.
#include <doctest/doctest.h>

#include "cli_test_util.hpp"

using namespace fabricsim::cli_test;

#ifdef FABRICSIM_PYTHON
namespace {
// python3 with the module on its path, running `script` (a file written into `d`).
Run python(const fs::path& d, const std::string& script, const std::string& args = "") {
  {
    std::ofstream f(d / "t.py");
    f << script;
  }
  return run_in(d, "PYTHONPATH=" + quoted(FABRICSIM_PYTHON_DIR) + " " + quoted(FABRICSIM_PYTHON) + " t.py " + args);
}
}  // namespace

TEST_CASE("python: run() and coll() give the CLI's numbers; topology() its summary") {
  fs::path d = scratch_dir("python_api");
  REQUIRE(run_in(d, fabricsim::cli_test::fabricsim("run --json run.json")).rc == 0);
  REQUIRE(run_in(d, fabricsim::cli_test::fabricsim("coll -t dgx-h100 --op all_gather -b 1M -e 64M -f 4 --json coll.json")).rc == 0);
  Run r = python(d, R"(import json, fabricsim
cli = json.load(open("run.json"))
py = fabricsim.run()
assert py == cli, "run() differs from fabricsim run --json"
print("iteration_s", py["iteration_s"])
c = fabricsim.coll("dgx-h100", op="all_gather", minbytes="1M", maxbytes="64M", stepfactor=4)
assert c["rows"] == json.load(open("coll.json"))["rows"], "coll() rows differ from fabricsim coll --json"
assert "busbw" in c["table"]
print("rows", len(c["rows"]))
ring = dict(op="all_reduce", minbytes="64M", algo="ring", proto="simple", fidelity="step", calibration="default")
ok = fabricsim.coll("superpod", {"nodes": 4, "node": "dgx-h100"}, **ring)
slow = fabricsim.coll("superpod", {"nodes": 4, "node": "dgx-h100"}, faults=["link=n1.nic0,leaf.r0.0:50%"], **ring)
same = fabricsim.coll("superpod", {"nodes": 4, "node": "dgx-h100"}, faults=[{"link": ["n1.nic0", "leaf.r0.0"], "bandwidth": "50%"}], **ring)
assert slow["rows"] == same["rows"] and slow["system"]["faults"] == same["system"]["faults"]
print("fault slower", slow["rows"][0]["time_us"] > 1.1 * ok["rows"][0]["time_us"])
t = fabricsim.topology("superpod", {"nodes": 2, "node": "dgx-h100"})
print("gpus", t["gpus"])
s = fabricsim.default_scenario()
s["workload"]["params"]["global_batch_size"] = 768
print("half batch faster", fabricsim.run(s)["iteration_s"] < py["iteration_s"])
)");
  CHECK(r.rc == 0);
  CHECK(r.err == "");
  CHECK(r.out.find("rows 4\n") != std::string::npos);
  CHECK(r.out.find("fault slower True\n") != std::string::npos);
  CHECK(r.out.find("gpus 16\n") != std::string::npos);
  CHECK(r.out.find("half batch faster True\n") != std::string::npos);
}

TEST_CASE("python: bad input raises fabricsim.InputError with the CLI's message") {
  fs::path d = scratch_dir("python_errors");
  Run r = python(d, R"(import fabricsim
for call in (lambda: fabricsim.run({"topology": {"preset": "dgx-h100"}, "workload": {"generator": "gpt", "params": {"num_layerz": 2}}}),
             lambda: fabricsim.coll("dgx-h100", op="all_reducee"),
             lambda: fabricsim.coll("dgx-h100", minbytes="1M", bogus=3),
             lambda: fabricsim.coll("dgx-h100", faults=["link=n0.gpu0,nowhere:50%"]),
             lambda: fabricsim.coll("dgx-h100", faults=[{"link": ["a"], "bandwidth": "50%"}]),
             lambda: fabricsim.topology("no-such-preset"),
             lambda: fabricsim.run(comm_model="psychic")):
    try:
        call()
        print("no error")
    except fabricsim.InputError as e:
        assert isinstance(e, ValueError)
        print("InputError:", e)
)");
  CHECK(r.rc == 0);
  CHECK(r.out.find("no error") == std::string::npos);
  CHECK(r.out.find("num_layerz") != std::string::npos);
  CHECK(r.out.find("--op all_reducee") != std::string::npos);
  CHECK(r.out.find("coll option 'bogus'") != std::string::npos);
  CHECK(r.out.find("nowhere") != std::string::npos);
  CHECK(r.out.find("<python>: /faults/0/link") != std::string::npos);
  CHECK(r.out.find("no-such-preset") != std::string::npos);
  CHECK(r.out.find("comm_model") != std::string::npos);
}

TEST_CASE("python: the TP x PP sweep example runs and names the fastest layout") {
  fs::path d = scratch_dir("python_example");
  const std::string ex = std::string(FABRICSIM_SOURCE_DIR) + "/examples/python/tp_pp_sweep.py";
  Run r = run_in(d, "PYTHONPATH=" + quoted(FABRICSIM_PYTHON_DIR) + " " + quoted(FABRICSIM_PYTHON) + " " + quoted(ex) +
                        " --out sweep --tp 2,4,8 --pp 1,2");
  CHECK(r.rc == 0);
  CHECK(r.out.find("fastest: TP ") != std::string::npos);
  const std::string csv = slurp(d / "sweep.csv");
  CHECK(csv.rfind("tp,pp,dp,iteration_s,tflops_per_gpu\n", 0) == 0);
  int lines = 0;
  for (char c : csv) lines += c == '\n';
  CHECK(lines == 6);  // header + 5 of the 3 x 2 layouts: TP 2 PP 1 needs 97.9 GiB of an A100's 80
  CHECK(r.err.find("TP 2 PP 1: ") != std::string::npos);
  CHECK(r.err.find("does not fit in GPU memory") != std::string::npos);
  // The plot where matplotlib is installed (Debian: python3-matplotlib), else the example says it skipped it.
  CHECK((fs::exists(d / "sweep.png") || r.out.find("matplotlib is not installed") != std::string::npos));
}
#endif

#ifdef FABRICSIM_PYTHON
TEST_CASE("python: after scripts/register-python.sh (run by setup.sh) plain python3 imports fabricsim") {
  // A scratch HOME, so the .pth goes to a scratch user site-packages and nothing outside the test changes.
  fs::path d = scratch_dir("python_register");
  const std::string env = "HOME=" + quoted(d.string()) + " PYTHONNOUSERSITE= ";
  const std::string build = fs::path(FABRICSIM_PYTHON_DIR).parent_path().string();
  Run reg = run_in(d, env + quoted(std::string(FABRICSIM_SOURCE_DIR) + "/scripts/register-python.sh") + " " + quoted(build));
  CHECK(reg.rc == 0);
  CHECK(reg.err.find("imports fabricsim from") != std::string::npos);
  // The command docs/python.md and README show.
  Run r = run_in(d, env + quoted(FABRICSIM_PYTHON) + " -c \"import fabricsim; print(fabricsim.run()['iteration_s'])\"");
  CHECK(r.rc == 0);
  CHECK(std::stod(r.out) > 1.0);  // the flagship's step is tens of seconds
}
#endif
