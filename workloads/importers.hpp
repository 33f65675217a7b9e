#pragma once
// Importers of other simulators' workload descriptions into a fabricsim Trace (docs/workloads.md,
// "Running other tools' workloads"). Chakra execution traces: workloads/chakra.hpp.
//
// ASTRA-sim 1.0 / SimAI (AICB) text workloads (workloads/astra.cpp). Grammar, as ASTRA-sim 1.0's
// Workload::initialize_workload and SimAI's fork of it read it (whitespace-separated tokens; line breaks
// inside a layer do not matter):
//   line 1: POLICY [model_parallel_NPU_group: M] [ep: E] [pp: P] [vpp: V] [ga: G] [all_gpus: N]
//           [checkpoints: K l1..lK] [checkpoint_initiates: K l1..lK] [pp_comm[:] BYTES] [DLRM_LAST_BOTTOM_LAYER: L]
//           POLICY = DATA | MODEL | HYBRID_DATA_MODEL | HYBRID_MODEL_DATA | HYBRID_DLRM [L] |
//           HYBRID_DLRM_ENHANCED [L] | HYBRID_TRANSFORMER | HYBRID_TRANSFORMER_FWD_IN_BCKWD | HYBRID_CUSTOMIZED | MICRO |
//           DISTRIBUTED_INFERENCE
//   line 2: the layer count; then per layer 12 tokens: name, reserved, fwd compute, fwd comm type, fwd bytes,
//           input-grad compute, ig comm type, ig bytes, weight-grad compute, wg comm type, wg bytes, update
//           time; HYBRID_CUSTOMIZED adds the layer's own policy as a 13th token.
//   comm types: NONE, ALLREDUCE, ALLGATHER, REDUCESCATTER, ALLTOALL, ALLREDUCEALLTOALL, BROADCAST, each
//           optionally suffixed _EP or _DP_EP (SimAI: the expert-parallel group, or the data-parallel group
//           of ranks holding the same experts).
// Groups (rank 0 is simulated, the other ranks run the same program; collectives span the group's ranks):
//   fwd / ig collectives run on the model-parallel group, wg collectives on the data-parallel group;
//   Transformer policies: TP = M consecutive ranks, DP = npus / (M * pp) ranks at stride M, EP = E of the
//   DP ranks, DP_EP = DP / E ranks at stride M * E. DATA: wg over all ranks (fwd/ig collectives involve no
//   dimension and are not run, as in ASTRA-sim 1.0); MODEL: fwd/ig over all ranks, no wg collective;
//   HYBRID_DATA_MODEL: data parallel within the first network dimension (dims, default the GPUs per host),
//   model parallel across; HYBRID_MODEL_DATA the reverse; HYBRID_DLRM: layer 0 (the embedding) over all
//   ranks, its forward all-to-all overlaps the bottom MLP until layer L+1; MICRO: the wg collectives
//   only, back to back, over all ranks.
// Flow: forward layers in order (compute, then the blocking fwd collective); backward in reverse order
// (checkpointed layers first recompute their forward), ig compute + blocking ig collective, wg compute + wg
// collective on its own stream (overlapping the rest of backward); the update after all of them.
// Params: npus (ranks; default all_gpus from line 1), cycle_ns (default 1: ASTRA-sim 1.0 cycles at 1 GHz,
// SimAI ticks are ns), dims (network NPU counts for HYBRID_DATA_MODEL / HYBRID_MODEL_DATA, e.g. "8,8"),
// gpus_per_host (co-located data-parallel copies; set from the topology by `fabricsim run`).
#include <cstdint>
#include <map>
#include <set>
#include <string>

#include "workloads/chakra.hpp"
#include "workloads/params.hpp"
#include "workloads/trace.hpp"

namespace fabricsim::workloads {

Trace import_astra_file(const std::string& path, const ParamMap& params, const std::string& where);
Trace import_astra_text(const std::string& text, const std::string& file, const ParamMap& params,
                        const std::string& where);

// Chakra (any encoding) with options from params (npus, comm_group, dims); see workloads/chakra.hpp.
Trace import_chakra_file(const std::string& path, const ParamMap& params = {}, const std::string& where = "params");

}  // namespace fabricsim::workloads

namespace fabricsim::workloads {

// The scenario's "topology" object for a workload of `ranks` ranks (0 = not known) on `topology`, a preset
// name or a topology file (made absolute): a single-server preset (dgx-h100, dgx-a100, ...) too small for
// the ranks becomes a superpod of enough such servers. `params` (the import's --param topology parameters,
// split_import_overrides) go into the preset's "params"; on a server preset a parameter only the superpod has
// (node, nodes, fabric, ...) makes it the superpod of such servers (node and nodes, unless given: the preset and
// enough of them for the ranks). `gpus` and `gpu_model` (optional) receive the topology's GPU count and its first
// GPU's model.
Json topology_for_ranks(const std::string& topology, std::int64_t ranks, std::int64_t* gpus = nullptr,
                        const std::map<std::string, std::string>& params = {}, std::string* gpu_model = nullptr);

// For the error that a job of `need` ranks does not fit on `topology` (a preset name or a file) built with `params`
// (the user's topology parameters) into `have` GPUs: what the topology is and has, and how to get enough, as
// --param / --topology options (`cli`) or as the scenario's "topology" object, e.g. "topology superpod (--param
// nodes=2) has 16 GPUs; --param nodes=8 (8 GPUs per node) fits the 64 ranks".
std::string gpus_shortfall(const std::string& topology, const std::map<std::string, std::string>& params,
                           std::int64_t have, std::int64_t need, bool cli);

// An import's --param overrides, split between the importer and the topology. A key in `importer_names` is the
// importer's (it wins over a topology parameter of the same name: gpu stays the gpt generator's, the GPU priced);
// a parameter of the preset `topology`, or of the superpod a server preset grows into, is the topology's. Any other
// key is refused here, with a line listing the topology's parameters (`Unknown::refuse`: the launch imports, whose
// importer is the gpt generator), or left to the importer, which refuses it in its own words (`Unknown::importer`:
// the Chakra and ASTRA-sim importers of `run --trace`). A topology file takes no parameters.
struct ImportOverrides {
  ParamMap importer;
  std::map<std::string, std::string> topology;
};
enum class UnknownParam { refuse, importer };
ImportOverrides split_import_overrides(const std::string& topology, const ParamMap& overrides,
                                       const std::set<std::string>& importer_names, UnknownParam unknown);
// The launch imports' split: the importer is the gpt generator (its parameter names), unknown keys refused.
ImportOverrides split_import_overrides(const std::string& topology, const ParamMap& overrides);

// A scenario document for running another tool's workload file without writing a scenario
// (`fabricsim run --trace PATH --topology NAME`): format "auto" (Chakra .et / JSON / jsonizer rank files or
// prefix -> "chakra", a fabricsim trace JSON -> "trace", anything else -> ASTRA-sim/SimAI text "astra"),
// "chakra", "astra" or "trace". `topology` is a preset name or a topology file; a single-server preset
// (dgx-h100, dgx-a100, ...) too small for the workload's ranks becomes a superpod of enough such servers.
// An ASTRA-sim file that does not state its rank count (no all_gpus:) gets the topology's GPU count.
Json scenario_for_trace(const std::string& path, const std::string& format, const std::string& topology,
                        const ParamMap& params);

}  // namespace fabricsim::workloads
