// A multi-host nccl-tests log is mapped to a topology only when its sidecar states the system and the network
// fabric (issue 23: an OCI A100 2x8 log used to be mapped silently to ABCI's 4-NIC nodes); the description
// selects the superpod fabric, NIC count and speed (validate/fabric_mapping.hpp), and one that leaves any of
// them open is a clear error.
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
  CHECK(s.params.at("fabric") == "infiniband-hdr");
  CHECK(s.rule.find("fabric infiniband-hdr, 4x 200 Gb/s, 2 hosts -> superpod") != std::string::npos);
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
  const SystemMapping given =
      map_system(bare, "dgx-a100", {{"fabric", "infiniband"}, {"nics_per_node", "4"}, {"nic_bandwidth", "200Gbps"}});
  CHECK(given.preset == "superpod");
  CHECK(given.params.at("nics_per_node") == "4");  // fewer NICs than GPUs: as given
  CHECK(given.params.at("nic_bandwidth") == "200Gbps");
  // The host's ports as the user counts them (OCI: 16 x 100 Gb/s for 8 GPUs) merge into one NIC per GPU, as on
  // the sidecar path and as NCCL merges the ports of one NIC (validate/fabric_mapping.hpp merge_nic_ports).
  const SystemMapping ports =
      map_system(bare, "dgx-a100", {{"fabric", "roce"}, {"nics_per_node", "16"}, {"nic_bandwidth", "100Gbps"}});
  CHECK(ports.params.at("nics_per_node") == "8");
  CHECK(ports.params.at("nic_bandwidth") == "200Gbps");
  CHECK(ports.rule.find("16 NIC ports per host -> 8x 200Gbps") != std::string::npos);
  // Without nic_bandwidth the fabric's line rate is the port's (InfiniBand NDR: 400 Gb/s).
  CHECK(map_system(bare, "dgx-a100", {{"fabric", "infiniband-ndr"}, {"nics_per_node", "16"}})
            .params.at("nic_bandwidth") == "800Gbps");
  e = error_of([&] { map_system(bare, "dgx-a100", {{"fabric", "roce"}, {"nics_per_node", "many"}}); });
  CHECK(e.find("--param nics_per_node") != std::string::npos);
  e = error_of([&] { map_system(bare, "dgx-a100", {{"fabric", "roce"}, {"nics_per_node", "16"}}); });
  CHECK(e.find("16 NIC ports for 8 GPUs per host need --param nic_bandwidth") != std::string::npos);

  const fs::path dir = fs::temp_directory_path() / ("fabricsim_mapping_" + std::to_string(::getpid()));
  const std::string oci = sidecar(dir, "OCI BM.GPU4.8 (A100-SXM4-40GB)", "NVSwitch; RoCE v2", "16x 100 Gb/s RoCE");
  // Another site's A100-40GB nodes: the server is a DGX A100 40GB anywhere, the fabric and NICs are the ones the
  // sidecar describes (16 x 100 Gb/s RoCE ports merged into one NIC per GPU: 8 x 200 Gb/s).
  const SystemMapping o = map_system(load_measurements(oci).at(0));
  CHECK(o.params.at("fabric") == "roce");
  CHECK(o.params.at("nics_per_node") == "8");
  CHECK(o.params.at("nic_bandwidth") == "200Gbps");
  // RoCE on ABCI-like nodes maps to the RoCE fabric; EFA without a line rate is an error.
  const std::string roce = sidecar(dir, "ABCI-like cluster", "RoCE v2 between nodes", "4x 200 Gb/s");
  CHECK(map_system(load_measurements(roce).at(0)).params.at("fabric") == "roce");
  const std::string efa = sidecar(dir, "ABCI test with AWS EFA", "EFA", "4x EFA");
  e = error_of([&] { map_system(load_measurements(efa).at(0)); });
  CHECK(e.find("the line rate of the efa NICs is missing from the description ('4x EFA')") != std::string::npos);
  // A sidecar that names no technology.
  const std::string none = sidecar(dir, "ABCI 2.0", "NVSwitch", "4 NICs");
  e = error_of([&] { map_system(load_measurements(none).at(0)); });
  CHECK(e.find("the interconnect 'NVSwitch' names no scale-out fabric fabricsim models") != std::string::npos);
  fs::remove_all(dir);
}
