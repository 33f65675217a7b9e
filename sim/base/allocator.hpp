#pragma once

namespace fabricsim {

// Keeps the memory a simulation frees for its next allocation instead of handing it back to the kernel.
//
// Pricing a collective builds a network over every link direction of the fabric (sim::Network, sim::FlowModel:
// a dozen per-link arrays, about 20 MB on a 16,384-GPU superpod) and frees it afterwards; a training step
// prices hundreds of distinct calls. With glibc's defaults (mallopt(3): a dynamic mmap threshold from 128 KiB
// and a trim threshold of twice it) those arrays are returned to the kernel at every free and faulted back in,
// zero-filled, at the next build: Llama-3.1-405B on 16,384 H100 (examples/workloads/llama3.1-405b-16384-h100.json)
// took 708k minor page faults and 8.3 s user + 6.3 s system CPU, against 42k faults and 1.5 + 0.35 s with the
// thresholds raised (measured 2026-11-27 on the 2-core development VM at load 8; docs/performance.md). Peak
// resident memory is unchanged (202 vs 201 MB there): the memory is reused, not added to.
// Call once at start-up, before any threads; a no-op where the C library has no mallopt.
void retain_freed_memory();

}  // namespace fabricsim
