// The blocks whose start was refused (the name ran already, and the error policy let the start
// return): their __exit__ ends nothing (scope.hpp).
#include <cstddef>
#include <vector>

#include "scope.hpp"

namespace pyext {
namespace {

// The blocks of this thread whose start was refused (the name ran already, and the error policy
// let the start return), innermost last: their __exit__ ends nothing. A block is known by its
// scope and the frame that runs its `with` (the caller of a decorated function), the same at its
// exit as at its entry: a scope object held and entered again (`with timer:` in a recursion, in
// two generators, in two asyncio tasks of one loop) or shared by threads then ends only what
// each block started. Per thread; touched only on a refusal and by the exits that follow one.
// Strong references: a block whose exit never comes here (a generator closed from another
// thread) keeps its scope and frame alive, so that no later one at the same address is taken
// for it.
struct Refused {
  Scope* scope;
  PyObject* frame;  // nullptr where no Python frame runs the block
};
thread_local std::vector<Refused> t_refused;

}  // namespace

Py_ssize_t g_refused = 0;

namespace {

/// The frame running the block being entered or exited (strong; nullptr where there is none).
PyObject* block_frame() {
  PyObject* frame = reinterpret_cast<PyObject*>(PyEval_GetFrame());
  if (frame == nullptr) PyErr_Clear();  // 3.11 on: making the frame object may fail
  Py_XINCREF(frame);
  return frame;
}

}  // namespace

/// Keeps a refused block of `self` until its exit (never throws: a refusal that cannot be kept
/// is forgotten, and its exit then ends the running block early, as before it was refused).
void keep_refused(Scope* self) {
  PyObject* frame = block_frame();
  try {
    t_refused.push_back({self, frame});
  } catch (...) {
    Py_XDECREF(frame);
    return;
  }
  Py_INCREF(self);
  ++g_refused;
  ++self->refused;
}

/// Whether this exit of `self` is a refused block's, which it then forgets.
bool take_refused(Scope* self) {
  if (self->refused == 0) return false;
  PyObject* frame = block_frame();
  Py_XDECREF(frame);  // only compared: the refused block holds its own reference
  for (std::size_t i = t_refused.size(); i-- > 0;) {
    const Refused r = t_refused[i];
    if (r.scope != self || r.frame != frame) continue;
    t_refused.erase(t_refused.begin() + static_cast<std::ptrdiff_t>(i));
    --g_refused;
    --self->refused;
    Py_XDECREF(r.frame);
    Py_DECREF(self);  // not the last reference: the caller's bound __exit__ holds one
    return true;
  }
  return false;
}

}  // namespace pyext
