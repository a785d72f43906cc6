// _Scope's object, shared by its type (scope.cpp) and the scope cache (scope_cache.cpp).
#pragma once

#include "extension.hpp"

#include <string_view>

namespace pyext {

enum class ScopeKind { Measure, Range };
enum ScopeOp { kEnter = 0, kExit = 1 };

struct Scope {
  // The name: a str (its UTF-8 buffer stays put, so laptime's name cache hits) or any other name.
  PyObject_HEAD PyObject* name;
  ScopeKind kind;
  // Blocks entered while the tool was enabled and not yet exited: __exit__ ends one of them. A
  // count, not a flag, so that one object shared by threads (`with timer:` in each loader
  // thread) ends every thread's measurement; each thread ends its own.
  Py_ssize_t open;
  // Blocks whose start was refused (scope.cpp's t_refused holds them) and not yet exited: the
  // scope cache then hands out a fresh scope, so that a later, valid block of the name is never
  // taken for the refused one at its exit.
  Py_ssize_t refused;
  // scope.__enter__ and scope.__exit__, made once for the scope's kind (strong references; each
  // holds the scope too).
  PyObject* bound[2];
  // The bytes laptime records for the name, found at the first block entered while enabled (not
  // before: a name that cannot be one raises only then, as start_meas does) and kept, held by
  // text_owner (the str itself, or the bytes of another name). A block then passes them without
  // looking at the name again; a range passes them as an NVTXRangeName, which keeps NVTX's
  // registered string, so that its push and its checked pop look nothing up.
  PyObject* text_owner;  // nullptr: not found yet
  std::string_view text;
  alignas(laptime::NVTXRangeName) unsigned char range_name[sizeof(laptime::NVTXRangeName)];
};

/// A new scope of `kind` for `name`, with its __enter__ and __exit__; nullptr with an exception.
PyObject* scope_new(PyObject* name, ScopeKind kind);
/// Unlinks a scope from its __enter__ and __exit__ (its tp_clear): the cycle they form is broken.
int scope_clear(PyObject* obj);

}  // namespace pyext
