// A measured multi-host run's fabric from its description (validate/fabric_mapping.hpp): every shared
// multi-node sidecar maps to the fabric, NIC count and line rate it states, and a description that names no
// fabric, or leaves out the NIC count, is an error saying what is missing.
#include <doctest/doctest.h>

#include <filesystem>

#include "sim/base/error.hpp"
#include "validate/fabric_mapping.hpp"
#include "validate/nccl_log.hpp"
#include "validate/calibrate.hpp"
#include "validate/report.hpp"
#include "validate/simulate.hpp"

using namespace fabricsim;
using namespace fabricsim::validate;

TEST_CASE("every shared multi-node sidecar maps to the fabric it describes") {
  const std::string d = std::string(FABRICSIM_SOURCE_DIR) + "/tests/data/";
  struct Want {
    const char* file;
    const char* fabric;
    int nics;
    double gbps;
  };
  const Want want[] = {
      {"nccl-tests-multinode/aws_p5_2node_16gpu_all_reduce_tableonly.meta.json", "efa", 8, 400},  // 32x 100G EFA
      {"nccl-tests-multinode/gcp_a4_b200_roce_2node_16gpu_all_gather.meta.json", "roce", 8, 400},
      {"nccl-tests-multinode/nvtests309_h100_ib400_2node_16gpu_all_reduce.meta.json", "infiniband-ndr", 8, 400},
      {"nccl-tests-multinode/nvtests309_xe9680_h100_ib400_2node_16gpu_all_reduce.meta.json", "infiniband-ndr", 8, 400},
      {"nccl-tests-multinode/oci_a100_roce_2node_16gpu_all_reduce.meta.json", "roce", 8, 200},  // 16 VFs of 100G
      {"nccl-tests-multinode/polaris_a100_slingshot11_8node_32gpu_all_gather.meta.json", "slingshot", 2, 200},
      {"nccl-tests/abci_inter_anode_job2_7194279_16gpu_all_reduce.meta.json", "infiniband-hdr", 4, 200},
      {"nccl-tests/abci_inter_vnode_job8_7194534_32gpu_all_reduce.meta.json", "infiniband-edr", 2, 100},
      {"nccl-tests/together_b200_2node_16gpu_sendrecv.meta.json", "infiniband-ndr", 8, 400},
  };
  for (const auto& w : want) {
    CAPTURE(w.file);
    auto ms = load_measurements(d + w.file);
    REQUIRE(!ms.empty());
    const Measurement& m = ms.front();
    FabricDescription f = describe_fabric(m.source, m.interconnect, m.nic, m.nranks / m.num_nodes);
    CHECK(f.fabric == w.fabric);
    CHECK(f.nics_per_node == w.nics);
    CHECK(f.nic_gbps == doctest::Approx(w.gbps));
    SystemMapping map = map_system(m);
    CHECK(map.preset == "superpod");
    CHECK(map.params.at("fabric") == w.fabric);
  }
}

TEST_CASE("an undescribable fabric is an error that says what is missing") {
  CHECK_THROWS_WITH_AS(describe_fabric("x.txt", "", "", 8), doctest::Contains("\"interconnect\" and \"nic\""),
                       InputError);
  CHECK_THROWS_WITH_AS(describe_fabric("x.txt", "Omni-Path 100", "8x 100 Gb/s", 8),
                       doctest::Contains("names no scale-out fabric"), InputError);
  CHECK_THROWS_WITH_AS(describe_fabric("x.txt", "InfiniBand", "HCA model not stated", 8),
                       doctest::Contains("unknown generation"), InputError);
  CHECK_THROWS_WITH_AS(describe_fabric("x.txt", "RoCE v2", "speed not stated", 8),
                       doctest::Contains("number of roce NICs per host is missing"), InputError);
  // SHARP only where the switches reduce (InfiniBand), and only when the description says it was used.
  CHECK(describe_fabric("x.txt", "InfiniBand NDR with SHARP (NCCL_COLLNET_ENABLE=1)", "8x 400 Gb/s", 8).sharp);
  CHECK_FALSE(describe_fabric("x.txt", "InfiniBand NDR", "8x 400 Gb/s", 8).sharp);
  CHECK_FALSE(describe_fabric("x.txt", "HPE Slingshot 11, NCCL_COLLNET_ENABLE=1", "2x 200 Gb/s", 4).sharp);
  // A fabric with a fixed line rate needs only the count.
  FabricDescription t = describe_fabric("x.txt", "GCP GPUDirect-TCPXO", "8 NICs", 8);
  CHECK(t.fabric == "tcpxo");
  CHECK(t.nic_gbps == doctest::Approx(200));
}

TEST_CASE("leave-one-out by system holds every node count of one cluster configuration out together") {
  const std::string d = std::string(FABRICSIM_SOURCE_DIR) + "/tests/data/";
  auto unit = [&](const std::string& f, bool by_system) {
    auto cases = make_cases(load_measurements(d + f));
    REQUIRE(cases.size() >= 1);
    return loo_unit(cases.front(), by_system);
  };
  const std::string two = unit("nccl-tests-multinode/nvtests309_h100_ib400_2node_16gpu_all_reduce.meta.json", true);
  const std::string eight = unit("nccl-tests-multinode/nvtests309_h100_ib400_8node_64gpu_all_reduce_minctas24_qps2.meta.json", true);
  const std::string p5 = unit("nccl-tests-multinode/aws_p5_2node_16gpu_all_reduce_tableonly.meta.json", true);
  CHECK(two.rfind("system:", 0) == 0);
  CHECK(two == eight);  // same servers, fabric and NICs; 2 and 8 nodes
  CHECK(two != p5);     // EFA, not InfiniBand
  CHECK(unit("nccl-tests/abci_inter_vnode_job2_7194532_8gpu_all_reduce.meta.json", true) ==
        unit("nccl-tests/abci_inter_vnode_job8_7194534_32gpu_all_reduce.meta.json", true));
  // Single-host logs and the plain leave-one-out stay per file.
  CHECK(unit("nccl-tests/together_h100_1node_8gpu_all_gather_ring.meta.json", true).rfind("system:", 0) != 0);
  CHECK(unit("nccl-tests-multinode/nvtests309_h100_ib400_2node_16gpu_all_reduce.meta.json", false) != two);
}
