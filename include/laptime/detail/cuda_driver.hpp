// laptime internals: the CUDA driver, loaded at run time.
//
// laptime links nothing of CUDA. It opens libcuda.so.1 with dlopen the first time a CUDA feature
// is used, initialises it, and looks up the few entry points it needs through cuGetProcAddress
// (falling back to dlsym for drivers older than 11.3). Because the driver is the layer below every
// CUDA runtime, this works whatever runtime the framework links (PyTorch's bundled cudart, a
// static cudart, another toolkit version) and syncs the very context that runtime made current.
//
// laptime declares the driver's calling interface itself (detail/cuda_abi.hpp) and needs no
// cuda.h: every file compiles the same CUDA layer, so files built with and without the toolkit's
// headers (nvcc and g++ in one program) share one layout and one behaviour.
#pragma once

#include <dlfcn.h>
#include <sys/stat.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <string>

#include "laptime/config.hpp"
#include "laptime/detail/cuda_abi.hpp"
#include "laptime/detail/env_vars.hpp"
#include "laptime/detail/process_singleton.hpp"

LAPTIME_BEGIN_NAMESPACE
namespace detail {

/// The driver entry points laptime calls. Plain function pointers so that tests can hand a fake
/// driver to the code that uses them (GpuEventTimer takes a CudaDriverApi).
struct CudaDriverApi {
  cu::Result (*init)(unsigned int flags) = nullptr;
  cu::Result (*driver_get_version)(int* version) = nullptr;
  cu::Result (*device_get_count)(int* count) = nullptr;
  cu::Result (*get_error_name)(cu::Result error, const char** name) = nullptr;
  cu::Result (*ctx_synchronize)() = nullptr;
  cu::Result (*ctx_get_current)(cu::Context* ctx) = nullptr;
  cu::Result (*ctx_push_current)(cu::Context ctx) = nullptr;
  cu::Result (*ctx_pop_current)(cu::Context* ctx) = nullptr;
  cu::Result (*stream_is_capturing)(cu::Stream stream, cu::CaptureStatus* status) = nullptr;
  cu::Result (*event_create)(cu::Event* event, unsigned int flags) = nullptr;
  cu::Result (*event_destroy)(cu::Event event) = nullptr;
  cu::Result (*event_record)(cu::Event event, cu::Stream stream) = nullptr;
  cu::Result (*event_query)(cu::Event event) = nullptr;
  cu::Result (*event_synchronize)(cu::Event event) = nullptr;
  cu::Result (*event_elapsed_time)(float* ms, cu::Event start, cu::Event end) = nullptr;
  cu::Result (*profiler_start)() = nullptr;
  cu::Result (*profiler_stop)() = nullptr;
};

/// Names of the errors laptime reports where the driver cannot name them itself (cuInit failing
/// before cuGetErrorName works, the toolkit's stub library).
inline const char* cuda_error_fallback_name(cu::Result r) noexcept {
  // Numbers, not enumerators: older cuda.h versions lack some of these names.
  switch (int{r}) {
    case 3:
      return "CUDA_ERROR_NOT_INITIALIZED";
    case 4:
      return "CUDA_ERROR_DEINITIALIZED";
    case 34:
      return "CUDA_ERROR_STUB_LIBRARY (a stub libcuda, no real driver)";
    case 46:
      return "CUDA_ERROR_DEVICE_UNAVAILABLE";
    case 100:
      return "CUDA_ERROR_NO_DEVICE";
    case 201:
      return "CUDA_ERROR_INVALID_CONTEXT";
    case 400:
      return "CUDA_ERROR_INVALID_HANDLE";
    case 600:
      return "CUDA_ERROR_NOT_READY";
    case 709:
      return "CUDA_ERROR_CONTEXT_IS_DESTROYED";
    case 803:
      return "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH";
    case 804:
      return "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE";
    default:
      return "CUDA error";
  }
}

/// "CUDA_ERROR_NOT_READY (600)": the driver's name for `r` where it has one.
template <int = 0>
std::string cuda_error_text(const CudaDriverApi& api, cu::Result r) {
  const char* name = nullptr;
  if (api.get_error_name == nullptr || api.get_error_name(r, &name) != cu::kSuccess ||
      name == nullptr) {
    name = cuda_error_fallback_name(r);
  }
  return std::string(name) + " (" + std::to_string(int{r}) + ")";
}

/// The process's driver: loaded once, shared by every copy of the header (process_singleton).
struct CudaDriver {
  CudaDriverApi api;
  bool available = false;  // loaded, cuInit succeeded, at least one device
  int driver_version = 0;  // cuDriverGetVersion: 13000 for CUDA 13.0
  int device_count = 0;
  std::string status;  // one line for users: what was loaded, or why CUDA is unavailable
};

/// Looks driver functions up in an open driver library. cuGetProcAddress_v2 (CUDA 12.0+) reports
/// per symbol whether the version sufficed; cuGetProcAddress (11.3+) has no status argument; where
/// neither answers, dlsym. cuGetProcAddress hands out the newest variant of a symbol introduced at
/// or before the CUDA version asked for, whatever cuda.h's plain name means: asked with 13000 for
/// "cuCtxSynchronize" it returns cuCtxSynchronize_v2(CUcontext). So each symbol is asked for with
/// the version of the variant whose signature CudaDriverApi declares (cudaTypedefs.h names them:
/// PFN_cuCtxSynchronize_v2000, PFN_cuCtxPushCurrent_v4000, ...), and the dlsym names are the
/// exported names of that same variant. LEGACY_STREAM: a null stream handle means the legacy
/// default stream, as documented.
class CudaSymbols {
 public:
  explicit CudaSymbols(void* lib) : lib_(lib) {
    get_proc2_ = reinterpret_cast<GetProc2>(find("cuGetProcAddress_v2"));
    get_proc1_ = reinterpret_cast<GetProc1>(find("cuGetProcAddress"));
  }
  void* find(const char* exported) const { return ::dlsym(lib_, exported); }
  void* resolve(const char* base, int abi, std::initializer_list<const char*> exported) const {
    void* fn = nullptr;
    if (get_proc2_ != nullptr) {
      cu::ProcQuery found = cu::kProcNotFound;
      if (get_proc2_(base, &fn, abi, cu::kProcLegacyStream, &found) != cu::kSuccess ||
          found != cu::kProcFound) {
        fn = nullptr;
      }
    } else if (get_proc1_ != nullptr) {
      if (get_proc1_(base, &fn, abi, cu::kProcLegacyStream) != cu::kSuccess) fn = nullptr;
    }
    for (const char* name : exported) {
      if (fn != nullptr) break;
      fn = find(name);
    }
    return fn;
  }

 private:
  using GetProc2 = cu::Result (*)(const char*, void**, int, cu::ProcFlags, cu::ProcQuery*);
  using GetProc1 = cu::Result (*)(const char*, void**, int, cu::ProcFlags);
  void* lib_;
  GetProc2 get_proc2_ = nullptr;
  GetProc1 get_proc1_ = nullptr;
};

/// Fills every entry point of `a` after cuInit; returns the name of one that the driver lacks, or
/// nullptr when it has them all.
template <int = 0>
const char* resolve_cuda_api(const CudaSymbols& s, int driver_version, CudaDriverApi& a) {
  const char* missing = nullptr;
#define LAPTIME_CUDA_RESOLVE(member, base, abi, ...)                                    \
  a.member = reinterpret_cast<decltype(a.member)>(s.resolve(base, abi, {__VA_ARGS__})); \
  if (a.member == nullptr) missing = base
  LAPTIME_CUDA_RESOLVE(device_get_count, "cuDeviceGetCount", 2000, "cuDeviceGetCount");
  LAPTIME_CUDA_RESOLVE(ctx_synchronize, "cuCtxSynchronize", 2000, "cuCtxSynchronize");
  LAPTIME_CUDA_RESOLVE(ctx_get_current, "cuCtxGetCurrent", 4000, "cuCtxGetCurrent");
  LAPTIME_CUDA_RESOLVE(ctx_push_current, "cuCtxPushCurrent", 4000, "cuCtxPushCurrent_v2");
  LAPTIME_CUDA_RESOLVE(ctx_pop_current, "cuCtxPopCurrent", 4000, "cuCtxPopCurrent_v2");
  LAPTIME_CUDA_RESOLVE(stream_is_capturing, "cuStreamIsCapturing", 10000, "cuStreamIsCapturing");
  LAPTIME_CUDA_RESOLVE(event_create, "cuEventCreate", 2000, "cuEventCreate");
  LAPTIME_CUDA_RESOLVE(event_destroy, "cuEventDestroy", 4000, "cuEventDestroy_v2");
  LAPTIME_CUDA_RESOLVE(event_record, "cuEventRecord", 2000, "cuEventRecord");
  LAPTIME_CUDA_RESOLVE(event_query, "cuEventQuery", 2000, "cuEventQuery");
  LAPTIME_CUDA_RESOLVE(event_synchronize, "cuEventSynchronize", 2000, "cuEventSynchronize");
  // cuEventElapsedTime_v2 (CUDA 12.8) has the same signature as the original; CUDA 13 drivers
  // are asked for it, older ones for the original.
  const bool elapsed_v2 = driver_version >= 12080;
  LAPTIME_CUDA_RESOLVE(event_elapsed_time, "cuEventElapsedTime", elapsed_v2 ? 12080 : 2000,
                       elapsed_v2 ? "cuEventElapsedTime_v2" : "cuEventElapsedTime",
                       "cuEventElapsedTime");
  LAPTIME_CUDA_RESOLVE(profiler_start, "cuProfilerStart", 4000, "cuProfilerStart");
  LAPTIME_CUDA_RESOLVE(profiler_stop, "cuProfilerStop", 4000, "cuProfilerStop");
#undef LAPTIME_CUDA_RESOLVE
  return missing;
}

/// Opens the driver library at `path` and fills a CudaDriver. Never throws; on failure `status`
/// says what went wrong. Public for tests (a missing library, the toolkit's stub library).
template <int = 0>
CudaDriver load_cuda_driver(const char* path) {
  CudaDriver d;
  // A path (not a name the loader searches for) must be a regular file: dlopen would wait forever
  // in open() on a FIFO nobody writes to.
  struct stat st;
  if (std::strchr(path, '/') != nullptr && ::stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
    d.status = "unavailable: cannot load the CUDA driver " + escaped(path) + " (not a file)";
    return d;
  }
  // RTLD_NODELETE: function pointers into the driver must stay valid for the whole process.
  void* lib = ::dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (lib == nullptr) {
    const char* why = ::dlerror();
    // The path (LAPTIME_CUDA_DRIVER's, which dlerror repeats) is escaped: a variable's text must
    // not rewrite the terminal that shows this status.
    d.status = "unavailable: cannot load the CUDA driver " + escaped(path) + " (" +
               escaped(why != nullptr ? why : "dlopen failed") + ")";
    return d;
  }
  CudaDriverApi& a = d.api;
  const CudaSymbols symbols(lib);
  a.init = reinterpret_cast<decltype(a.init)>(symbols.find("cuInit"));
  a.driver_get_version =
      reinterpret_cast<decltype(a.driver_get_version)>(symbols.find("cuDriverGetVersion"));
  a.get_error_name = reinterpret_cast<decltype(a.get_error_name)>(symbols.find("cuGetErrorName"));
  if (a.init == nullptr || a.driver_get_version == nullptr) {
    d.status = "unavailable: " + escaped(path) + " is not a CUDA driver (no cuInit)";
    return d;
  }
  if (const cu::Result r = a.init(0); r != cu::kSuccess) {
    d.status = "unavailable: cuInit failed: " + cuda_error_text(a, r);
    return d;
  }
  (void)a.driver_get_version(&d.driver_version);
  const char* missing = resolve_cuda_api(symbols, d.driver_version, a);
  const std::string version =
      std::to_string(d.driver_version / 1000) + "." + std::to_string(d.driver_version % 1000 / 10);
  if (missing != nullptr) {
    d.status = "unavailable: the CUDA driver (" + version + ") has no " + missing;
    return d;
  }
  if (const cu::Result r = a.device_get_count(&d.device_count); r != cu::kSuccess) {
    d.status = "unavailable: cuDeviceGetCount failed: " + cuda_error_text(a, r);
    return d;
  }
  if (d.device_count <= 0) {
    d.status = "unavailable: the CUDA driver (" + version + ") sees no device";
    return d;
  }
  d.available = true;
  d.status = "CUDA driver " + version + " (" + escaped(path) + "), " +
             std::to_string(d.device_count) + (d.device_count == 1 ? " device" : " devices");
  return d;
}

// A template, like the functions here, so that a file that never touches CUDA does not compile
// the loader (the NVTX wrapper's files: the compile-cost goal of docs/build.md).
template <int = 0>
struct BasicCudaDriverHolder {
  BasicCudaDriverHolder() {
    // LAPTIME_CUDA_DRIVER: another driver library (a non-standard install, a test double).
    const auto path = env_text<Env::cuda_driver>();
    driver = load_cuda_driver(path ? path->data() : "libcuda.so.1");
  }
  CudaDriver driver;
};
using CudaDriverHolder = BasicCudaDriverHolder<>;

/// The process's CUDA driver, loaded on first use (thread-safe; one load per process).
template <int = 0>
const CudaDriver& cuda_driver() {
  return process_singleton<CudaDriverHolder>("cuda_driver").driver;
}

}  // namespace detail
LAPTIME_END_NAMESPACE
