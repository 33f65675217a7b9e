#include "sim/base/allocator.hpp"

#include <cstdlib>  // defines __GLIBC__ on glibc

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace fabricsim {

void retain_freed_memory() {
#if defined(__GLIBC__)
  // Allocations up to 32 MiB (glibc's largest mmap threshold on 64-bit, DEFAULT_MMAP_THRESHOLD_MAX) come from
  // the heap, and the heap's free top is returned to the kernel only above 1 GiB.
  mallopt(M_MMAP_THRESHOLD, 32 * 1024 * 1024);
  mallopt(M_TRIM_THRESHOLD, 1024 * 1024 * 1024);
#endif
}

}  // namespace fabricsim
