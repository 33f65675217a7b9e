// A multi-host nccl-tests log is mapped to a topology only when its sidecar states the system and the network
// technology (issue 23: an OCI A100 2x8 log used to be mapped silently to ABCI's 4-NIC nodes); the technology
// selects the superpod fabric, and one the preset does not model is a clear error.
#include <doctest/doctest.h>

#include <filesystem>
#include <functional>
#include <fstream>
#include <string>

#include <unistd.h>

#include "sim/base/error.hpp"
#include "sim/base/json_reader.hpp"
#include "validate/simulate.hpp"

using namespace fabricsim;
using namespace fabricsim::validate;
namespace fs = std::filesystem;

namespace {

const std::string kData = std::string(FABRICSIM_SOURCE_DIR) + "/tests/data/nccl-tests/";

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

// A copy of the ABCI 2-node sidecar in `dir`, next to a copy of its raw log, with `system` and `nic` replaced.
std::string sidecar(const fs::path& dir, const std::string& system, const std::string& interconnect, const std::string& nic) {
  Json j = load_json_file(kData + "abci_inter_anode_job2_7194279_16gpu_all_reduce.meta.json");
  fs::create_directories(dir / "raw");
  fs::copy_file(kData + j["raw_file"].get<std::string>(), dir / j["raw_file"].get<std::string>(),
                fs::copy_options::overwrite_existing);
  j["system"] = system;
  j["interconnect"] = interconnect;
  j["nic"] = nic;
  const fs::path p = dir / (std::to_string(std::hash<std::string>{}(system + interconnect + nic)) + ".meta.json");
  std::ofstream(p) << j.dump(1);
  return p.string();
}

}  // namespace

TEST_CASE("multi-host logs map to a topology only when the system and network are stated") {
  // The shared ABCI sidecar states both: the ABCI A rule, superpod of 2 nodes, InfiniBand fabric.
  const Measurement abci = load_measurements(kData + "abci_inter_anode_job2_7194279_16gpu_all_reduce.meta.json").at(0);
  SystemMapping s = map_system(abci);
  CHECK(s.preset == "superpod");
  CHECK(s.params.at("fabric") == "infiniband");
  CHECK(s.rule.find("infiniband -> fabric=infiniband") != std::string::npos);
  // The same raw log without its sidecar: the GPU name alone does not say which network joined the hosts.
  ParseHints h;
  h.op = "all_reduce";
  const Measurement bare = load_measurements(kData + "raw/abci_inter_anode_job02.sh.7194279.nccl.txt", h).at(0);
  REQUIRE(bare.num_nodes == 2);
  std::string e = error_of([&] { map_system(bare); });
  CHECK(e.find("abci_inter_anode_job02.sh.7194279.nccl.txt: a 2-host run whose log does not say which system") !=
        std::string::npos);
  CHECK(e.find("pass --topology PRESET") != std::string::npos);
  // With --topology the user decides, and the run maps.
  CHECK(map_system(bare, "dgx-a100", {{"nics_per_node", "4"}}).preset == "superpod");

  const fs::path dir = fs::temp_directory_path() / ("fabricsim_mapping_" + std::to_string(::getpid()));
  // Another site's A100-40GB nodes: the ABCI rule does not describe them.
  const std::string oci = sidecar(dir, "OCI BM.GPU4.8 (A100-SXM4-40GB)", "NVSwitch; RoCE v2", "16x 100 Gb/s RoCE");
  e = error_of([&] { map_system(load_measurements(oci).at(0)); });
  CHECK(e.find("describes abci nodes, but the sidecar's system is 'OCI BM.GPU4.8") != std::string::npos);
  // RoCE on ABCI-like nodes maps to the Ethernet fabric; EFA (no superpod fabric of that name) is an error.
  const std::string roce = sidecar(dir, "ABCI-like cluster", "RoCE v2 between nodes", "4x 200 Gb/s");
  CHECK(map_system(load_measurements(roce).at(0)).params.at("fabric") == "ethernet");
  const std::string efa = sidecar(dir, "ABCI test with AWS EFA", "EFA", "4x EFA");
  e = error_of([&] { map_system(load_measurements(efa).at(0)); });
  CHECK(e.find("the run's network is efa, which no superpod fabric models") != std::string::npos);
  // A sidecar that names no technology.
  const std::string none = sidecar(dir, "ABCI 2.0", "NVSwitch", "4 NICs");
  e = error_of([&] { map_system(load_measurements(none).at(0)); });
  CHECK(e.find("the sidecar does not name the network technology") != std::string::npos);
  fs::remove_all(dir);
}
