#pragma once
// Chakra execution traces (MLCommons Chakra, the input of ASTRA-sim 2.0) into a fabricsim Trace.
// Three encodings of the same schema (workloads/chakra/et_def.proto) are read:
//  - protobuf `.et`: a stream of varint32-length-delimited messages, one GlobalMetadata then one Node per op
//    (Chakra's third_party/utils/protoio.hh framing);
//  - what `chakra_jsonizer` writes: protobuf-JSON objects back to back (metadata, then one per node);
//  - Chakra JSON as ASTRA-sim's JSON feeder reads it: {"workload_graph": [{"Id", "Name", "NodeType",
//    "data_deps", "ctrlDeps", "runtime", "is_cpu_op", "comm_type", "comm_size", ...}], "ngpus", ...}.
// One file per rank: PREFIX.<rank>.et or PREFIX.<rank>.json (or one file, imported as rank 0 or the rank its
// name carries).
//
// Semantics (docs/workloads.md "Chakra"):
//  - duration_micros / runtime are microseconds. A COMP_NODE with no duration but num_ops / tensor_size
//    attributes is priced by the roofline (flops, bytes).
//  - Ordering comes only from data_deps and ctrl_deps. When ctrl_deps close a cycle with data_deps (the
//    PyTorch converter uses ctrl_deps for the enclosing op), the rank is ordered by data_deps alone, as
//    ASTRA-sim's ETFeeder does, and this is said on stderr. A cycle through data_deps alone is an error
//    naming the node ids and the file. Dependencies on ids absent from the file (traces cut from larger
//    ones) are dropped and counted on stderr.
//  - COMM_COLL_NODE: comm_type (CollectiveCommType), comm_size (bytes); a collective run on the CPU
//    (is_cpu_op true, PyTorch's c10d:: host op) takes its recorded duration, as in ASTRA-sim; a GPU
//    collective without comm_type/comm_size takes its recorded duration (listed on stderr). The
//    communicator: pg_name's ranks (from the comm-group file, ASTRA-sim's --comm-group-configuration
//    format {"<pg_name>": [ranks]}, else the ranks whose files call that pg_name), else involved_dim over
//    the network dimensions `dims` (ASTRA-sim npus_count), else the whole world.
//  - COMM_SEND_NODE / COMM_RECV_NODE: comm_dst / comm_src (the other side defaults to this file's rank),
//    comm_tag, comm_size.
//  - Attributes the simulator does not use are accepted and listed once on stderr.
#include <cstdint>
#include <string>
#include <vector>

#include "workloads/params.hpp"
#include "workloads/trace.hpp"

namespace fabricsim::workloads {

struct ChakraOptions {
  std::int32_t npus = 0;                  // world size; 0 = from the files (rank count, ngpus, peers, groups)
  std::string comm_group_file;            // ASTRA-sim comm group JSON {"pg_name": [ranks...]}
  std::vector<std::int32_t> dims;         // network dimensions for involved_dim (ASTRA-sim npus_count)
  bool quiet = false;                     // no stderr notes
};

// Params (scenario "params" / CLI --param): npus, comm_group (file), dims ("8,4").
ChakraOptions chakra_options_from_params(const ParamMap& params, const std::string& where);

// `path`: a file, or a prefix with files PREFIX.0.et / PREFIX.0.json, PREFIX.1..., read as ranks 0..n-1.
Trace import_chakra(const std::string& path, const ChakraOptions& opt = {});
// The same import from rank files already in memory (fuzzing, tests): ranks[i] is rank i's file, `name` is
// how messages name it, and its encoding is told apart by content as for files on disk.
struct ChakraRankBuffer {
  std::string name;
  std::string data;
};
Trace import_chakra_buffers(const std::vector<ChakraRankBuffer>& ranks, const std::string& path,
                            const ChakraOptions& opt = {});
// The rank files behind `path` (empty when there are none).
std::vector<std::string> chakra_rank_files(const std::string& path);
// True when `path` names Chakra data (a .et file, a Chakra / jsonizer JSON file, or a rank prefix of them).
bool looks_like_chakra(const std::string& path);

}  // namespace fabricsim::workloads
