// laptime: configuration macros and the versioned namespace.
//
// Every macro here can be defined by the caller first (normally as a compile definition carried by
// the CMake target laptime::laptime); the caller's definition wins. docs/configuration.md lists
// each one with its cost.
#pragma once

// One clear message rather than a hundred errors from the first std::optional.
#if defined(__cplusplus) && __cplusplus < 201703L
#error "laptime needs C++17 or later: compile with -std=c++17"
// GCC goes on after #error; a missing header stops it there.
#include "laptime: C++17 or later is required"
#endif

#define LAPTIME_VERSION_MAJOR 0
#define LAPTIME_VERSION_MINOR 1
#define LAPTIME_VERSION_PATCH 0
#define LAPTIME_VERSION_STRING "0.1.0"

// LAPTIME_DISABLE: compile the instrumentation out. Every type and signature stays, the bodies are
// empty, and the macros (LAPTIME_MEAS, LAPTIME_RANGE, ...) expand to nothing. Code built with and
// without it may be linked into one program: the two variants live in different inline
// namespaces, so they never collide under the one-definition rule.
//
// nvcc's device pass (__CUDA_ARCH__ defined) compiles laptime as if LAPTIME_DISABLE were given:
// that pass keeps only device code, and laptime is host code (kernels never call it), so it needs
// the declarations that the file's host functions use, not the hot path under them. The host pass
// compiles laptime as asked (docs/build.md, "A trainer-sized CUDA file under nvcc").
// Defined empty or to a non-zero value it disables; `-DLAPTIME_DISABLE=0` (a build system's
// off switch, CMake's $<BOOL:...>) leaves laptime in: the second test is true only for a literal 0.
#if defined(LAPTIME_DISABLE) && (LAPTIME_DISABLE + 0 == 0) && (1 - LAPTIME_DISABLE - 1 == 0)
#define LAPTIME_DISABLE_IS_ZERO 1
#endif
#if (defined(LAPTIME_DISABLE) && !defined(LAPTIME_DISABLE_IS_ZERO)) || defined(__CUDA_ARCH__)
#define LAPTIME_ENABLED 0
#define LAPTIME_ABI_BASE_ v1_disabled
#else
#define LAPTIME_ENABLED 1
#define LAPTIME_ABI_BASE_ v1
#endif

// Compiled in, laptime reports misuse with exceptions (a UsageError, under the default policy):
// one message for -fno-exceptions, not a page of errors from its headers. Compiled out
// (LAPTIME_DISABLE) it needs none.
#if LAPTIME_ENABLED && !defined(__cpp_exceptions) && !defined(__EXCEPTIONS)
#error "laptime needs exceptions; with -fno-exceptions, compile it out: -DLAPTIME_DISABLE"
#include "laptime: exceptions are required"
#endif

// A 64-bit target (x86-64, aarch64): the clock scales its counter with 128-bit arithmetic, and
// counts, sizes and the NVTX structures are laid out for 64 bits. One message on a 32-bit one
// (-m32); compiled out it builds there.
#if LAPTIME_ENABLED && defined(__SIZEOF_POINTER__) && __SIZEOF_POINTER__ < 8
#error "laptime needs a 64-bit target; on a 32-bit one, compile it out: -DLAPTIME_DISABLE"
#include "laptime: a 64-bit target is required"
#endif

// LAPTIME_HAVE_CUDA_HEADERS: whether the CUDA toolkit's cuda.h is visible to this file, for
// information (build_info): laptime's CUDA layer does not need it. It loads the driver at run time
// and declares the calling interface itself (detail/cuda_abi.hpp), so that files built with and
// without the toolkit's headers compile the same layer. Detected with __has_include.
#ifndef LAPTIME_HAVE_CUDA_HEADERS
#if LAPTIME_ENABLED && defined(__has_include)
#if __has_include(<cuda.h>)
#define LAPTIME_HAVE_CUDA_HEADERS 1
#endif
#endif
#endif
#ifndef LAPTIME_HAVE_CUDA_HEADERS
#define LAPTIME_HAVE_CUDA_HEADERS 0
#endif

// LAPTIME_HAVE_NVTX: whether the NVTX3 headers are used. Detected with __has_include (the CMake
// target puts the toolkit's include directory on the path where it finds one; a plain `nvcc`
// build has it); the caller's definition wins. Without them the wrapper still tracks and checks
// ranges but sends nothing to a profiler, and enable() warns once. Cost: none either way.
#ifndef LAPTIME_HAVE_NVTX
#if LAPTIME_ENABLED && defined(__has_include)
#if __has_include(<nvtx3/nvToolsExt.h>)
#define LAPTIME_HAVE_NVTX 1
#endif
#endif
#endif
#ifndef LAPTIME_HAVE_NVTX
#define LAPTIME_HAVE_NVTX 0
#endif

#define LAPTIME_BEGIN_NAMESPACE \
  namespace laptime {           \
  inline namespace LAPTIME_ABI_NAMESPACE {
#define LAPTIME_END_NAMESPACE \
  }                           \
  }

// LAPTIME_MAX_NAMES: the most distinct measurement names per process (fixed so that per-thread
// storage never moves while a report reads it). Cost: 16 bytes of pointers per name and thread.
#ifndef LAPTIME_MAX_NAMES
#define LAPTIME_MAX_NAMES 4096
#endif
// Another value (an integer literal) changes the layout that inline code and the implementation
// part share, so it names its own inline namespace: a file built with it and an implementation
// part built without it (src/laptime.cpp, the CMake target) fail to link, naming
// laptime::v1_max_names_<N>, instead of corrupting memory at run time (docs/configuration.md).
// So do libstdc++'s debug mode (_GLIBCXX_DEBUG: other standard containers in the objects both
// share) and its old std::string (_GLIBCXX_USE_CXX11_ABI=0, as a PyTorch extension built against
// a pre-cxx11-ABI wheel gets: results() returns strings inside a struct, which gives its symbol no
// ABI tag of its own): a file built with either links only against an implementation part built
// with it. <cstddef> brings libstdc++'s defaults (a toolchain whose default is the old string).
// Compiled out too: its results() and to_json() are inline, and two files of one program that
// differ so would share them.
#include <cstddef>
#if LAPTIME_ENABLED && LAPTIME_MAX_NAMES != 4096
#define LAPTIME_ABI_NAMES_ LAPTIME_CONCAT(v1_max_names_, LAPTIME_MAX_NAMES)
#else
#define LAPTIME_ABI_NAMES_ LAPTIME_ABI_BASE_
#endif
#if defined(_GLIBCXX_DEBUG)
#define LAPTIME_ABI_DEBUG_ LAPTIME_CONCAT(LAPTIME_ABI_NAMES_, _glibcxx_debug)
#else
#define LAPTIME_ABI_DEBUG_ LAPTIME_ABI_NAMES_
#endif
#if defined(_GLIBCXX_USE_CXX11_ABI) && _GLIBCXX_USE_CXX11_ABI == 0
#define LAPTIME_ABI_NAMESPACE LAPTIME_CONCAT(LAPTIME_ABI_DEBUG_, _old_string)
#else
#define LAPTIME_ABI_NAMESPACE LAPTIME_ABI_DEBUG_
#endif

// LAPTIME_NVTX_MAX_NAMES: the most distinct range names registered with NVTX per process. Names
// beyond it still work, passed as text (an allocation per push) with a one-time warning, so that a
// program generating names ("batch 17", "batch 18", ...) cannot grow memory without bound.
// Cost: about 100 bytes per name, plus a per-thread table entry for each name the thread used.
// It takes effect where the implementation part is compiled (src/laptime.cpp, or a file that
// includes <laptime/laptime.hpp>).
#ifndef LAPTIME_NVTX_MAX_NAMES
#define LAPTIME_NVTX_MAX_NAMES LAPTIME_MAX_NAMES
#endif

#if defined(__GNUC__) || defined(__clang__)
#define LAPTIME_LIKELY(x) __builtin_expect(!!(x), 1)
#define LAPTIME_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define LAPTIME_NOINLINE __attribute__((noinline))
#define LAPTIME_COLD __attribute__((noinline, cold))
#define LAPTIME_ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define LAPTIME_LIKELY(x) (x)
#define LAPTIME_UNLIKELY(x) (x)
#define LAPTIME_NOINLINE
#define LAPTIME_COLD
#define LAPTIME_ALWAYS_INLINE inline
#endif

// LAPTIME_IMPL: marks the functions of laptime's implementation part (the out-of-line half of a
// component: reports, configuration, first use of a name, errors). They are defined weak, so that
// every translation unit that includes <laptime/laptime.hpp> and the compiled library
// (src/laptime.cpp, what the CMake target laptime::laptime links) may each carry a copy and the
// program still links, to one of them (identical code).
#define LAPTIME_IMPL __attribute__((weak))

#define LAPTIME_CONCAT_IMPL(a, b) a##b
#define LAPTIME_CONCAT(a, b) LAPTIME_CONCAT_IMPL(a, b)

// Clang's warning `w` off from here to LAPTIME_CLANG_ALLOW_END, where laptime means what it warns
// about (its users' -Weverything builds, as Chromium's, must stay clean); nothing elsewhere.
#if defined(__clang__)
#define LAPTIME_PRAGMA(text) _Pragma(#text)
#define LAPTIME_CLANG_ALLOW(w) \
  _Pragma("clang diagnostic push") LAPTIME_PRAGMA(clang diagnostic ignored w)
#define LAPTIME_CLANG_ALLOW_END _Pragma("clang diagnostic pop")
#else
#define LAPTIME_CLANG_ALLOW(w)
#define LAPTIME_CLANG_ALLOW_END
#endif

// nvcc's device pass compiles laptime out (above), so that pass's text no longer shows how the host
// pass compiles laptime. A compiler cache that keys a .cu file on that text (ccache hashes nvcc's
// preprocessed output, the device pass's, and leaves the -D options out) would then hand a
// LAPTIME_DISABLE build the object of a normal build. This assertion writes the macros that change
// the host pass into the device pass's text; it generates nothing (docs/build.md, "A trainer-sized
// CUDA file under nvcc").
#ifdef __CUDA_ARCH__
#define LAPTIME_STR_IMPL(x) #x
#define LAPTIME_STR(x) LAPTIME_STR_IMPL(x)
static_assert(true, "laptime's host pass:"
#if defined(LAPTIME_DISABLE) && !defined(LAPTIME_DISABLE_IS_ZERO)
                    " LAPTIME_DISABLE"
#endif
#ifdef LAPTIME_IMPL_LINKED
                    " LAPTIME_IMPL_LINKED"
#endif
                    " " LAPTIME_STR(LAPTIME_MAX_NAMES) " " LAPTIME_STR(LAPTIME_NVTX_MAX_NAMES)
                    " " LAPTIME_STR(LAPTIME_SLOW_TAIL) " " LAPTIME_STR(LAPTIME_HAVE_CUDA_HEADERS)
                    " " LAPTIME_STR(LAPTIME_HAVE_NVTX) " " LAPTIME_STR(LAPTIME_HAVE_NVTX_COUNTERS));
#endif
