#pragma once
// Helpers shared by the all_to_all tests in tests/coll: the spec every case starts from and a relative error.
#include <cmath>
#include <cstdint>

#include "models/collectives.hpp"
#include "topologies/topology.hpp"

namespace fabricsim::test {

// A direct (Simple protocol) all_to_all of S bytes per rank over every GPU of t, at fidelity f.
inline models::CollectiveSpec a2a(const topo::Topology& t, std::uint64_t S, models::Fidelity f) {
  models::CollectiveSpec s;
  s.op = models::Op::AllToAll;
  s.bytes = S;
  s.algorithm = models::Algorithm::Direct;
  s.protocol = models::Protocol::Simple;
  s.fidelity = f;
  s.communicator = t.gpus();
  return s;
}

inline double rel(double a, double b) { return std::abs(a - b) / std::abs(b); }

}  // namespace fabricsim::test
