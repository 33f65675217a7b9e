// Sweep core: grid/list expansion, CSV rows, failures kept, thread-count independence, resume.
#include <doctest/doctest.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "sim/base/error.hpp"
#include "replay/outputs_sweep.hpp"

using namespace fabricsim;

namespace {

Json base_scenario() {
  return Json::parse(R"({"topology": {"preset": "dgx-h100", "params": {"nodes": 1}},
                          "workload": {"generator": "gpt", "params": {"tp": 1}},
                          "outputs": {"timeline": "t.json"}})");
}

sim::SweepSpec grid_spec() {
  Json j = Json::object();
  j["scenario"] = base_scenario();
  j["axes"] = Json::parse(R"([{"name": "nodes", "path": "/topology/params/nodes", "values": [1, 2, 4]},
                                {"name": "layout", "values": [
                                   {"label": "tp1", "set": {"/workload/params/tp": 1}},
                                   {"label": "tp8,x", "set": {"/workload/params/tp": 8, "/workload/params/pp": 2}}]}])");
  j["metrics"] = {"mem"};
  return sim::parse_sweep(j, "sweep.json");
}

// A deterministic stand-in for the scenario runner: figures computed from the scenario's values; nodes=2 with
// tp=8 fails as a real run would on a bad layout.
sim::RunResult fake_run(const Json& scen, const std::string& source) {
  int nodes = scen["topology"]["params"]["nodes"];
  int tp = scen["workload"]["params"]["tp"];
  if (scen.contains("outputs")) throw InputError(source, "outputs must have been removed");
  if (nodes == 2 && tp == 8) throw InputError(source + ": /workload/params/tp", "tp=8 does not fit,\nsecond line");
  sim::RunResult r;
  r.gpus = nodes * 8;
  r.iteration_s = 1.0 / (nodes * tp);
  r.samples_per_s = 512 / r.iteration_s;
  r.breakdown.compute_s = 0.5 * r.iteration_s;
  r.breakdown.exposed_comm_s = {{"tp", 0.1 * r.iteration_s}, {"dp", 0.2 * r.iteration_s}, {"weird", 0.05}};
  r.metrics = {{"mem", 1e9 * tp}};
  return r;
}

}  // namespace

TEST_CASE("grid expansion: last axis fastest, values set by pointer, outputs dropped") {
  auto s = grid_spec();
  REQUIRE(s.points.size() == 6);
  CHECK(s.input_columns == std::vector<std::string>{"nodes", "layout"});
  CHECK(s.points[0].inputs == std::vector<std::string>{"1", "tp1"});
  CHECK(s.points[1].inputs == std::vector<std::string>{"1", "tp8,x"});
  CHECK(s.points[5].inputs == std::vector<std::string>{"4", "tp8,x"});
  Json p5 = sim::point_scenario(s, s.points[5]);
  CHECK(p5["topology"]["params"]["nodes"] == 4);
  CHECK(p5["workload"]["params"]["tp"] == 8);
  CHECK(p5["workload"]["params"]["pp"] == 2);
  CHECK(!p5.contains("outputs"));
  CHECK(s.base["outputs"]["timeline"] == "t.json");  // base untouched
}

TEST_CASE("list mode and bad sweep files") {
  Json j = Json::object();
  j["scenario"] = base_scenario();
  j["points"] = Json::parse(R"([{"label": "a", "set": {"/topology/params/nodes": 2}},
                                  {"label": "b", "set": {"/topology/params/nodes": 3}}])");
  auto s = sim::parse_sweep(j, "l.json");
  REQUIRE(s.points.size() == 2);
  CHECK(s.input_columns == std::vector<std::string>{"label"});
  CHECK(sim::point_scenario(s, s.points[1])["topology"]["params"]["nodes"] == 3);

  auto expect_error = [](const Json& bad, const std::string& needle) {
    try {
      sim::parse_sweep(bad, "bad.json");
      FAIL("expected InputError for " << bad.dump());
    } catch (const InputError& e) {
      std::string w = e.what();
      CHECK_MESSAGE(w.find("bad.json") != std::string::npos, w);
      CHECK_MESSAGE(w.find(needle) != std::string::npos, w);
    }
  };
  Json b = j;
  b["colour"] = 1;
  expect_error(b, "colour");
  b = j;
  b["points"][1]["label"] = "a";
  expect_error(b, "/points/1/label");
  b = j;
  b["points"][0]["set"] = Json::object({{"topology/params/nodes", 1}});
  expect_error(b, "/points/0/set/topology");
  b = j;
  b["points"][0]["set"] = Json::object({{"/topology/preset/x", 1}});  // through a string
  expect_error(b, "point 0");
  Json g = Json::object();
  g["scenario"] = base_scenario();
  g["axes"] = Json::array();
  expect_error(g, "/axes");
  g["axes"] = Json::parse(R"([{"name": "n", "path": "/topology/params/nodes", "values": [[1]]}])");
  expect_error(g, "/axes/0/values/0");
  g["axes"] = Json::parse(R"([{"name": "n", "values": [1]}])");
  expect_error(g, "/axes/0/values/0");
}

TEST_CASE("rows: ok and failed points, same CSV for 1 and 2 threads") {
  auto s = grid_spec();
  std::vector<std::size_t> all = {0, 1, 2, 3, 4, 5};
  sim::SweepRunOptions one;
  one.threads = 1;
  std::vector<std::size_t> failed_seen;
  one.on_row = [&](std::size_t i, const std::string&, bool ok, const std::string& err) {
    if (!ok) {
      failed_seen.push_back(i);
      CHECK(err.find("tp=8 does not fit") != std::string::npos);
    }
  };
  auto rows1 = sim::run_sweep_points(s, all, fake_run, one);
  CHECK(failed_seen == std::vector<std::size_t>{3});
  REQUIRE(rows1.size() == 6);
  std::string csv1 = sim::sweep_csv(s, rows1);

  // Each point waits (up to 10 s) until two distinct threads have taken a point, so the check does not depend
  // on the second thread starting before the first has drained the queue on a loaded machine; with one
  // worker the wait times out and ids.size() stays 1.
  std::set<std::thread::id> ids;
  std::mutex mu;
  std::condition_variable both;
  auto slow_run = [&](const Json& scen, const std::string& src) {
    {
      std::unique_lock<std::mutex> l(mu);
      ids.insert(std::this_thread::get_id());
      both.notify_all();
      both.wait_for(l, std::chrono::seconds(10), [&] { return ids.size() >= 2; });
    }
    return fake_run(scen, src);
  };
  sim::SweepRunOptions two;
  two.threads = 2;
  auto rows2 = sim::run_sweep_points(s, all, slow_run, two);
  CHECK(ids.size() == 2);
  CHECK(sim::sweep_csv(s, rows2) == csv1);

  std::istringstream in(csv1);
  std::string line;
  std::getline(in, line);
  CHECK(line ==
        "point,nodes,layout,status,error,gpus,iteration_s,samples_per_s,tokens_per_s,tflops_per_gpu,"
        "gpu_seconds_per_step,compute_s,exposed_tp_s,exposed_pp_s,exposed_dp_s,exposed_ep_s,exposed_all_to_all_s,"
        "exposed_other_s,exposed_comm_total_s,bubble_s,idle_s,mem,input_hash");
  std::getline(in, line);
  // nodes=1, tp=1: iteration 1 s, 8 GPUs; then the point's input hash.
  CHECK(line == "0,1,tp1,ok,,8,1,512,0,0,8,0.5,0.1,0,0.2,0,0,0.05,0.35,0,0,1e+09," +
                    sim::point_input_hash(s, s.points[0]));
  std::getline(in, line);
  CHECK(line.rfind("1,1,\"tp8,x\",ok,,8,0.125,", 0) == 0);
  std::getline(in, line);
  std::getline(in, line);
  CHECK(line.rfind("3,2,\"tp8,x\",failed,", 0) == 0);
  CHECK(line.find("second line") != std::string::npos);  // newline flattened
  CHECK(std::count(line.begin(), line.end(), ',') >= 21);
}

TEST_CASE("resume: rows already present are recognised; a changed sweep is refused") {
  auto s = grid_spec();
  auto rows = sim::run_sweep_points(s, {0, 1, 2, 3, 4, 5}, fake_run, {});
  std::string full = sim::sweep_csv(s, rows);
  // Interrupted file: header, rows 4 and 0 (completion order), then half a row.
  std::string partial = sim::sweep_csv_header(s) + rows[4] + rows[0] + rows[3] + "5,4,tp8";
  auto done = sim::read_done_rows(s, partial, "out.csv");
  REQUIRE(done.size() == 3);
  CHECK(done.count(0));
  CHECK(done.count(3));  // failed rows count as done
  CHECK(done.count(4));
  std::vector<std::size_t> todo;
  for (std::size_t i = 0; i < s.points.size(); ++i)
    if (!done.count(i)) todo.push_back(i);
  CHECK(todo == std::vector<std::size_t>{1, 2, 5});
  auto more = sim::run_sweep_points(s, todo, fake_run, {});
  more.insert(done.begin(), done.end());
  CHECK(sim::sweep_csv(s, more) == full);

  CHECK(sim::read_done_rows(s, "", "out.csv").empty());
  CHECK_THROWS_AS(sim::read_done_rows(s, "point,x\n", "out.csv"), InputError);
  std::string changed = sim::sweep_csv_header(s);
  changed += rows[0];
  changed.replace(changed.find("\n0,1,tp1") + 3, 1, "9");  // point 0 now claims nodes=9
  CHECK_THROWS_AS(sim::read_done_rows(s, changed, "out.csv"), InputError);
}

TEST_CASE("resume: a row computed from another base scenario or other run options runs again") {
  auto s = grid_spec();
  // The hash is 16 hex digits, the same for the same inputs, different for each point of the grid.
  std::set<std::string> hashes;
  for (const auto& p : s.points) {
    const std::string h = sim::point_input_hash(s, p);
    CHECK(h.size() == 16);
    CHECK(h.find_first_not_of("0123456789abcdef") == std::string::npos);
    CHECK(h == sim::point_input_hash(grid_spec(), p));
    hashes.insert(h);
  }
  CHECK(hashes.size() == s.points.size());
  auto rows = sim::run_sweep_points(s, {0, 1, 2, 3, 4, 5}, fake_run, {});
  const std::string full = sim::sweep_csv(s, rows);
  std::size_t stale = 99;
  CHECK(sim::read_done_rows(s, full, "out.csv", &stale).size() == 6);
  CHECK(stale == 0);

  // Same axes and labels, but the base scenario changed (not an axis): every row is stale.
  auto changed = grid_spec();
  changed.base["workload"]["params"]["seq"] = 4096;
  CHECK(sim::read_done_rows(changed, full, "out.csv", &stale).empty());
  CHECK(stale == 6);
  // Different run options (e.g. --comm-model analytic) also invalidate the rows.
  auto other = grid_spec();
  other.run_options = "comm_model=analytic";
  CHECK(sim::read_done_rows(other, full, "out.csv", &stale).empty());
  CHECK(stale == 6);
  // One edited row: only that point runs again.
  std::string one = full;
  const std::string h0 = sim::point_input_hash(s, s.points[0]);
  one.replace(one.find(h0), h0.size(), "0000000000000000");
  auto done = sim::read_done_rows(s, one, "out.csv", &stale);
  CHECK(stale == 1);
  CHECK(done.size() == 5);
  CHECK(!done.count(0));
}
