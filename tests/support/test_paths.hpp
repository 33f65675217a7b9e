#pragma once
// Where the tests find the source tree and the built programs. Every test translation unit sees this header
// (tests/CMakeLists.txt force-includes it); the paths themselves live in one generated source file per build
// (tests/support/test_paths.cpp.in), so no test's compile line carries an absolute path and ccache shares the
// test objects between checkouts (worktrees, fresh clones) of the same commit.
// FABRICSIM_BINARY and the optional harness macros are defined only for the apps tests, and only where CMake
// built the program they name, so `#ifdef FABRICSIM_PYTHON` and friends keep meaning "this build has it".

const char* fabricsim_test_source_dir();
#define FABRICSIM_SOURCE_DIR fabricsim_test_source_dir()

#ifdef FABRICSIM_HAVE_BINARY
const char* fabricsim_test_binary();
#define FABRICSIM_BINARY fabricsim_test_binary()
#endif
#ifdef FABRICSIM_HAVE_PYTHON
const char* fabricsim_test_python();
const char* fabricsim_test_python_dir();
#define FABRICSIM_PYTHON fabricsim_test_python()
#define FABRICSIM_PYTHON_DIR fabricsim_test_python_dir()
#endif
#ifdef FABRICSIM_HAVE_NCCL_BENCH
const char* fabricsim_test_nccl_bench();
#define FABRICSIM_NCCL_BENCH fabricsim_test_nccl_bench()
#endif
#ifdef FABRICSIM_HAVE_KERNEL_BENCH
const char* fabricsim_test_kernel_bench();
#define FABRICSIM_KERNEL_BENCH fabricsim_test_kernel_bench()
#endif
