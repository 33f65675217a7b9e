// The Perfetto timeline's link counters tell the same story as the link statistics: on a real run, each
// track's time average over the run equals the link direction's util_avg_run, under the shared-network model
// (instantaneous utilisation from the engine's time series) and the idle-fabric engine model (the run
// average, held flat).
#include <doctest/doctest.h>

#include <map>
#include <sstream>

#include "cli_test_util.hpp"
#include "sim/base/json_reader.hpp"

using namespace fabricsim::cli_test;
using fabricsim::Json;

TEST_CASE("timeline link counters average to the link statistics' util_avg_run on real runs") {
  fs::path d = scratch_dir("timeline_counters");
  std::ofstream(d / "s.json") << small_gpt_scenario(2, 16, 4, 2);
  for (const std::string model : {"shared", "engine"}) {
    CAPTURE(model);
    Run r = run_in(d, fabricsim::cli_test::fabricsim("run s.json --quiet --comm-model " + model +
                                                     " --timeline t.json --link-stats l.csv --json r.json"));
    REQUIRE_MESSAGE(r.rc == 0, r.err);
    // link_id,direction,from,to,kind,tier,capacity_Bps,bytes,busy_s,util_avg_busy,util_avg_run,util_peak
    std::map<std::string, double> run_util;
    std::istringstream csv(slurp(d / "l.csv"));
    std::string line;
    std::getline(csv, line);
    while (std::getline(csv, line)) {
      std::vector<std::string> f;
      std::stringstream ls(line);
      for (std::string x; std::getline(ls, x, ',');) f.push_back(x);
      REQUIRE(f.size() == 12);
      run_util["link " + f[0] + " " + f[2] + "->" + f[3]] = std::stod(f[10]);
    }
    const Json t = Json::parse(slurp(d / "t.json"));
    const double span_us = Json::parse(slurp(d / "r.json"))["span_s"].get<double>() * 1e6;
    std::map<std::string, std::vector<std::pair<double, double>>> tracks;
    for (const auto& e : t["traceEvents"])
      if (e["ph"] == "C") {
        std::string name = e["name"];
        tracks[name.substr(0, name.find(" ("))].push_back({e["ts"].get<double>(), e["args"]["util"].get<double>()});
      }
    REQUIRE(tracks.size() > 0);
    for (auto& [name, pts] : tracks) {
      CAPTURE(name);
      std::sort(pts.begin(), pts.end());
      double area = 0;
      for (std::size_t i = 0; i < pts.size(); ++i)
        area += pts[i].second * ((i + 1 < pts.size() ? pts[i + 1].first : span_us) - pts[i].first);
      REQUIRE(run_util.count(name));
      CHECK(area / span_us == doctest::Approx(run_util[name]).epsilon(0.01).scale(1e-4));
    }
  }
}
