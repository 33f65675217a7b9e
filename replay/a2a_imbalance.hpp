#pragma once
// The all-to-all part of the time lost to load imbalance (MoE routing skew), an idle-fabric estimate.
//
// Every all_to_allv call with a byte matrix (Communicator::a2a_matrix: MoE dispatch / combine) is priced twice
// with the communication model's own idle-fabric price (CommModel::idle_collective, the price the replay
// gives a call that shares no link): with its matrix, and with a uniform router's: the communicator's
// a2a_uniform where the workload gives it (the gpt generator does: under the flex dispatcher a group that
// straddles NVLink domains unevenly has unequal row sums with a uniform router too, which is placement, not
// skew), else its balanced counterpart (same total bytes, every rank sending and receiving the same amount,
// see balanced_a2a_matrix). The difference, summed over
// a simulated rank's calls, is the call time the skew costs that rank; the result is the largest such sum
// over the simulated ranks (the expert-compute part, moe.imbalance_compute_s, is likewise the most loaded
// pipeline stage's). Limits: it counts call time on an idle fabric, not step time: the part of a call hidden
// behind compute (A2A overlap, DualPipe) or stretched by contention on the shared network is not separated.
// Cost: a skewed call the replay itself priced on an idle fabric (every call under the engine model, the
// isolated and idle-window calls under the shared one) takes the replay's price (CommModel::
// replayed_idle_price, the same number); the engine models price calls with equal schedule inputs once
// (EngineCommBase::idle_collective), so the balanced counterparts of a group's layers cost one price.
#include <cstddef>
#include <vector>

#include "replay/comm_model.hpp"
#include "workloads/trace.hpp"

namespace fabricsim::sim {

// The balanced counterpart of an n x n all_to_allv matrix: the same total, zero where `m` is zero, scaled
// per row and per column (iterative proportional fitting) until every row and every column sums to
// total / n. For a router's matrix m[i][j] = share[j] x f(i, j) (the gpt generator's dispatch, f = 1, or
// the flex dispatcher's same-server/other-server factor; the combine is its transpose) this is the matrix
// a uniform router gives at the same total: with f = 1 every entry total / n^2, i.e. each off-diagonal pair
// gets the off-diagonal total / (n (n - 1)) and the diagonal (a rank's tokens for its own experts) keeps
// its total. When no such scaling exists (a rank sends or receives nothing) the off-diagonal total is spread
// evenly over the off-diagonal pairs and the diagonal total evenly over the diagonal.
std::vector<std::vector<double>> balanced_a2a_matrix(const std::vector<std::vector<double>>& m);

struct A2aImbalance {
  double seconds = 0;      // max over simulated ranks of the sum over their calls of (skewed - balanced)
  std::size_t calls = 0;   // all_to_allv calls with a matrix, over the simulated ranks
  std::size_t priced = 0;  // distinct (communicator, bytes, algorithm) priced twice (balanced ones skipped)
};

A2aImbalance all_to_all_imbalance(const workloads::Trace& trace, CommModel& comm);

}  // namespace fabricsim::sim
