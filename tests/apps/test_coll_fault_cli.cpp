// `fabricsim coll --fault SPEC`: a link / switch / NIC fault in a cluster scenario's faults[] vocabulary,
// applied to the topology before pricing (replay/coll_sweep.cpp), and the certified step-level ring that
// collective_time now prices rings with (sim/engine/ring_bounds.hpp): the CLI's degraded ring equals the
// event simulation of the same ring on the same faulted topology, and bad fault specs exit 2 with one line.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_test_util.hpp"
#include "models/ring_stream.hpp"
#include "models/system.hpp"
#include "sim/base/error.hpp"
#include "sim/engine/collective_time.hpp"
#include "sim/engine/ring_stream.hpp"
#include "workloads/cluster.hpp"

namespace {

namespace fs = std::filesystem;
namespace cli_test = fabricsim::cli_test;
using namespace fabricsim;

fs::path scratch() {
  static const fs::path d = cli_test::scratch_dir("coll_fault_cli");
  return d;
}

cli_test::Run run_cli(const std::string& args) { return cli_test::run_in(scratch(), cli_test::fabricsim("coll " + args)); }

// 32 H100 (4 DGX servers) on the superpod fabric, the built-in calibration, a step-level Simple ring.
const char* kRing = "-t superpod -p nodes=4 --calibration default --op all_reduce -b 64M --algo ring --proto simple "
                    "--fidelity step";

models::System superpod4() {
  return models::System(models::system_spec("superpod", {{"nodes", "4"}, {"node", "dgx-h100"}}, "default"));
}

// The System with `faults` applied, as `coll --fault` builds it.
models::System with_faults(const models::System& base, const std::vector<std::string>& specs) {
  std::vector<workloads::FaultSpec> faults;
  for (const auto& s : specs) faults.push_back(workloads::parse_fault_text(s, "--fault"));
  std::vector<std::string> notes;
  return models::System(workloads::apply_topology_faults(base.topology(), faults, notes), base.calibration(),
                        base.calibration_ref());
}

models::CollectiveSpec ring_spec(const topo::Topology& t) {
  models::CollectiveSpec s;
  s.op = models::Op::AllReduce;
  s.bytes = std::uint64_t{64} << 20;
  s.algorithm = models::Algorithm::Ring;
  s.protocol = models::Protocol::Simple;
  s.fidelity = models::Fidelity::Step;
  s.communicator = t.gpus();
  return s;
}

// The event simulation of the ring (no certificate, no completion batching).
double events_s(const models::System& sys) {
  const auto rs = models::build_ring_stream(ring_spec(sys.topology()), sys.topology(), sys.routing(false),
                                            sys.calibration());
  REQUIRE(rs);
  sim::RingStreamOptions o;
  o.certify = false;
  o.batch_tolerance_s = 0;
  const auto r = sim::run_ring_stream(*rs, sys.topology(), sys.routing(false), sys.calibration(), o);
  REQUIRE(r.events > 0);
  return r.makespan_s;
}

double json_time_s(const std::string& file) {
  const auto j = nlohmann::json::parse(cli_test::slurp(scratch() / file));
  REQUIRE(j["rows"].size() == 1);
  return j["rows"][0]["time_us"].get<double>() * 1e-6;
}

}  // namespace

TEST_CASE("coll --fault: the degraded ring is certified and equals the event simulation of the faulted fabric") {
  const std::string link = "link=n1.nic0,leaf.r0.0:50%";
  const auto r = run_cli(std::string(kRing) + " --fault " + link + " --json f.json");
  REQUIRE_MESSAGE(r.rc == 0, r.err);
  CHECK(r.out.find("# fault: link n1.nic0 <-> leaf.r0.0 at 50 % of its bandwidth") != std::string::npos);
  const double cli_s = json_time_s("f.json");
  // The JSON says what the fault changed, and validate still reads the file (a known key of the schema).
  {
    const auto fj = nlohmann::json::parse(cli_test::slurp(scratch() / "f.json"));
    REQUIRE(fj["system"]["faults"].size() == 1);
    CHECK(fj["system"]["faults"][0].get<std::string>() == "fault: link n1.nic0 <-> leaf.r0.0 at 50 % of its bandwidth");
    const auto v = cli_test::run_in(scratch(), cli_test::fabricsim("validate --calibration default f.json"));
    CHECK_MESSAGE(v.rc == 0, v.err);
  }

  const models::System base = superpod4();
  const models::System faulted = with_faults(base, {link});
  const double ev_s = events_s(faulted);
  CAPTURE(cli_s);
  CAPTURE(ev_s);
  CHECK(std::abs(cli_s - ev_s) <= 1e-9 * ev_s);
  // Through the one pricing function: the certified path, not the events.
  sim::CollectiveCall call;
  call.spec = ring_spec(faulted.topology());
  const sim::CollectiveTime ct = sim::time_collective(faulted, call);
  CHECK(ct.method == "ring-stream");
  CHECK_MESSAGE(ct.certified, ct.certify_reason);
  CHECK(ct.time_s == doctest::Approx(cli_s).epsilon(1e-12));
  // The fault costs time: the same ring without it is faster.
  const auto u = run_cli(std::string(kRing) + " --json u.json");
  REQUIRE(u.rc == 0);
  CHECK(json_time_s("u.json") < 0.9 * cli_s);

  // The JSON object of a scenario's faults[] entry means the same: the same table, byte for byte.
  const auto j = run_cli(std::string(kRing) +
                         " --fault '{\"link\": [\"n1.nic0\", \"leaf.r0.0\"], \"bandwidth\": \"50%\"}'");
  REQUIRE_MESSAGE(j.rc == 0, j.err);
  CHECK(j.out == r.out);
  const auto d = run_cli(std::string(kRing) + " --fault link=n1.nic0,leaf.r0.0:0.5");
  CHECK(d.out == r.out);
}

TEST_CASE("coll --fault: where the bounds stay apart (a GPU's NVLink at 10 %) the events price the ring") {
  // The merged NVSwitch of server 0 (models::merge_nvswitch_planes names it after the first plane).
  const std::string link = "link=n0.gpu0,n0.nvsw0+planes:10%";
  const models::System faulted = with_faults(superpod4(), {link});
  sim::CollectiveCall call;
  call.spec = ring_spec(faulted.topology());
  const sim::CollectiveTime ct = sim::time_collective(faulted, call);
  CHECK_FALSE(ct.certified);
  CHECK(ct.certify_reason.find("n0.gpu0") != std::string::npos);
  CHECK(ct.time_s == doctest::Approx(events_s(faulted)).epsilon(1e-12));
  const auto r = run_cli(std::string(kRing) + " --fault " + link + " --json n.json");
  REQUIRE_MESSAGE(r.rc == 0, r.err);
  CHECK(std::abs(json_time_s("n.json") - ct.time_s) <= 1e-12 * ct.time_s);
}

TEST_CASE("coll --fault: a switch or NIC down and several faults together") {
  // A NIC down: its GPU leaves through the next-closest NIC; the ring still completes, slower.
  const auto nic = run_cli(std::string(kRing) + " --fault nic=n2.nic3 --json nic.json");
  REQUIRE_MESSAGE(nic.rc == 0, nic.err);
  CHECK(nic.out.find("# fault: nic n2.nic3 down") != std::string::npos);
  const auto two = run_cli(std::string(kRing) + " --fault nic=n2.nic3 --fault link=n1.nic0,leaf.r0.0:25% --json two.json");
  REQUIRE_MESSAGE(two.rc == 0, two.err);
  CHECK(two.out.find("# fault: nic n2.nic3 down") != std::string::npos);
  CHECK(two.out.find("# fault: link n1.nic0 <-> leaf.r0.0 at 25 %") != std::string::npos);
  CHECK(json_time_s("two.json") > json_time_s("nic.json"));
}

TEST_CASE("coll --fault: bad fault specs exit 2 with one line naming the flag") {
  struct Case {
    std::string spec, expect;
  };
  const std::vector<Case> cases = {
      {"link=n1.nic0", "link=A,B:FRACTION or link=A,B:down"},
      {"link=n1.nic0,leaf.r0.0:150%", "/bandwidth: a fraction in (0, 1]"},
      {"link=n1.nic0,leaf.r0.0:half", "a fraction such as 0.5"},
      {"link=n9.nic0,leaf.r0.0:50%", "no node 'n9.nic0'"},
      {"link=n1.nic0,n2.nic0:50%", "no link between 'n1.nic0' and 'n2.nic0'"},
      {"switch=n1.nic0", "a fabric switch ('n1.nic0' is not one)"},
      {"gpu=3:20%", "a link, switch or NIC fault"},
      {"node=1", "a link, switch or NIC fault"},
      {"cable=1", "a fault object as in a scenario's faults[]"},
      {"'{\"link\": [\"n1.nic0\", \"leaf.r0.0\"]'", "(not valid JSON)"},
      {"'{\"link\": [\"n1.nic0\", \"leaf.r0.0\"], \"bandwidth\": \"50%\", \"speed\": 1}'", "speed"},
      {"'{\"link\": [\"n1.nic0\", \"leaf.r0.0\"]}'", "exactly one of \"down\": true or \"bandwidth\""},
  };
  for (const auto& c : cases) {
    CAPTURE(c.spec);
    const auto r = run_cli(std::string(kRing) + " --fault " + c.spec);
    CAPTURE(r.err);
    CHECK(r.rc == 2);
    CHECK(r.out.empty());
    CHECK(r.err.find("--fault ") == r.err.find("error: ") + 7);
    CHECK(r.err.find(c.expect) != std::string::npos);
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  }
}
