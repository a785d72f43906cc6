// laptime internals: the part of the CUDA driver's binary interface that laptime calls, declared
// here so that laptime needs no cuda.h.
//
// The driver is loaded at run time (detail/cuda_driver.hpp), so only its calling interface
// matters: handles are opaque pointers, results and enumerations are ints, and the values below
// are the driver's, as cuda.h gives them (ctest cuda-test checks each against cuda.h). Every file
// then compiles the same CUDA layer whatever headers it sees: a program that mixes files built by
// nvcc (which sees cuda.h) with files built by g++ (which may not) has one layout of laptime's
// objects and GPU timing in all of them.
#pragma once

#include <cstdint>

#include "laptime/config.hpp"

LAPTIME_BEGIN_NAMESPACE
namespace detail {
namespace cu {

struct ContextHandle;
struct StreamHandle;
struct EventHandle;

using Result = int;               // CUresult
using Context = ContextHandle*;   // CUcontext
using Stream = StreamHandle*;     // CUstream, cudaStream_t
using Event = EventHandle*;       // CUevent
using CaptureStatus = int;        // CUstreamCaptureStatus
using ProcQuery = int;            // CUdriverProcAddressQueryResult
using ProcFlags = std::uint64_t;  // cuuint64_t flags of cuGetProcAddress

inline constexpr Result kSuccess = 0;
inline constexpr Result kErrorDeinitialized = 4;
inline constexpr Result kErrorInvalidContext = 201;
inline constexpr Result kErrorInvalidHandle = 400;
inline constexpr Result kErrorNotReady = 600;
inline constexpr Result kErrorContextIsDestroyed = 709;

inline constexpr unsigned kEventDefault = 0x0;        // CU_EVENT_DEFAULT: the event times
inline constexpr unsigned kEventDisableTiming = 0x2;  // CU_EVENT_DISABLE_TIMING (never used)
inline constexpr CaptureStatus kCaptureNone = 0;      // CU_STREAM_CAPTURE_STATUS_NONE
inline constexpr CaptureStatus kCaptureActive = 1;    // CU_STREAM_CAPTURE_STATUS_ACTIVE
inline constexpr ProcFlags kProcLegacyStream = 1;     // CU_GET_PROC_ADDRESS_LEGACY_STREAM
inline constexpr ProcQuery kProcFound = 0;            // CU_GET_PROC_ADDRESS_SUCCESS
inline constexpr ProcQuery kProcNotFound = 1;         // CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND

}  // namespace cu
}  // namespace detail
LAPTIME_END_NAMESPACE
