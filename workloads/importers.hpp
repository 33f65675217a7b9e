#pragma once
// Importers of other simulators' workload descriptions into a fabricsim Trace.
//
// Chakra execution traces, JSON form (the layout ASTRA-sim's et_feeder reads: {"workload_graph": [node...]},
// one file per rank named PREFIX.<rank>.json). Node fields: "Id", "Name", "NodeType" (4 COMP_NODE,
// 5 COMM_SEND_NODE, 6 COMM_RECV_NODE, 7 COMM_COLL_NODE; 1-3 metadata/memory nodes are imported as
// zero-time ops), "data_deps" (ids), "runtime" (nanoseconds, ASTRA-sim's tick), "comm_type"
// (Chakra CollectiveCommType: 0 ALL_REDUCE, 1 REDUCE, 2 ALL_GATHER, 5 BROADCAST, 6 ALL_TO_ALL,
// 7 REDUCE_SCATTER), "comm_size" (bytes), "comm_src", "comm_dst", "comm_tag"; "is_cpu_op",
// "tensor_size", "comm_priority", "involved_dim(s)", "involved_dim_size" are accepted and ignored
// (collectives run over all ranks). Other keys are errors.
//
// ASTRA-sim 1.0 text workloads: line 1 the parallelism (DATA, MODEL, HYBRID_DLRM <last bottom layer>,
// HYBRID_DATA_MODEL, HYBRID_MODEL_DATA, HYBRID_TRANSFORMER), line 2 the layer count, then one line per
// layer: name, reserved, fwd compute (cycles), fwd comm type, fwd comm bytes, input-grad compute, ig comm
// type, ig bytes, weight-grad compute, wg comm type, wg bytes, update time. Comm types ALLREDUCE,
// ALLGATHER, REDUCESCATTER, ALLTOALL, NONE. Semantics imported: forward layers in order (fwd compute, then
// its fwd collective, blocking); backward in reverse order (ig compute + blocking ig collective, wg compute,
// wg collective non-blocking on a separate stream, all waited for before the update). Params: "npus"
// (required: ranks), "cycle_ns" (default 1). All ranks run the same program, so rank 0 is simulated and
// the collectives span all npus ranks (symmetry).
#include <string>

#include "workloads/params.hpp"
#include "workloads/trace.hpp"

namespace fabricsim::workloads {

// `path`: a single Chakra JSON file (imported as rank 0 of world size max(1, referenced ranks + 1)) or a
// prefix with files PREFIX.0.json, PREFIX.1.json, ... (ranks 0..n-1).
Trace import_chakra_file(const std::string& path);
Trace import_chakra_json(const std::vector<Json>& per_rank, const std::vector<std::string>& files);

Trace import_astra_file(const std::string& path, const ParamMap& params, const std::string& where);
Trace import_astra_text(const std::string& text, const std::string& file, const ParamMap& params,
                        const std::string& where);

}  // namespace fabricsim::workloads
