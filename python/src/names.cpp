// A Python object -> the bytes laptime records as its name, for names that are not compact ASCII
// str (the hot methods read those in place, extension.hpp's with_name): other str through their
// UTF-8, any other object through a cached str() (as the seed displayed its names), both behind
// an identity cache so that a name used again costs no conversion (docs/python.md, Names).
#include "extension.hpp"

#include <cstdint>

namespace pyext {
namespace {

/// The bytes laptime records for a str: UTF-8, where a lone surrogate U+DC80..U+DCFF (a file
/// name decoded with surrogateescape) becomes its original byte again; any other lone surrogate
/// is written as `\udxxx`. New reference, or nullptr with an exception set.
PyObject* name_bytes(PyObject* str) {
  PyObject* bytes = PyUnicode_AsEncodedString(str, "utf-8", "surrogateescape");
  if (bytes == nullptr && PyErr_ExceptionMatches(PyExc_UnicodeEncodeError)) {
    PyErr_Clear();
    bytes = PyUnicode_AsEncodedString(str, "utf-8", "backslashreplace");
  }
  return bytes;
}

// Bounds the cache: objects used as names are kept alive by it, so a program that makes a new
// object per call (each with its own identity) must not grow it forever.
constexpr Py_ssize_t kNameCacheSize = LAPTIME_MAX_NAMES;

/// The name of `obj`, which is not a str with a UTF-8 form: the bytes of str(obj), as the seed
/// displayed its names with str(). Cached by the object itself (hash and ==, as the seed's dict
/// of names did) in the calling interpreter's name cache (an == may run that interpreter's Python
/// code: interpreters.cpp), so a name used again costs a dict lookup, no str() and no allocation,
/// and its bytes keep one address (laptime's per-thread name cache hits). A new reference to a
/// bytes object, or nullptr with TypeError for an unhashable object (the seed's dict refused it
/// too).
[[gnu::cold]] PyObject* fallback_name(const char* call, PyObject* obj) {
  PyObject* cache = name_cache();
  if (cache == nullptr) return nullptr;
  if (PyObject* cached = PyDict_GetItemWithError(cache, obj)) return Py_NewRef(cached);
  if (PyErr_Occurred()) {
    if (PyErr_ExceptionMatches(PyExc_TypeError)) {
      PyErr_Clear();
      PyErr_Format(PyExc_TypeError,
                   "laptime: %s: a name is a str or a hashable object (named by its str()), not "
                   "%.100s",
                   call, Py_TYPE(obj)->tp_name);
    }
    return nullptr;
  }
  PyObject* text = PyUnicode_Check(obj) ? Py_NewRef(obj) : PyObject_Str(obj);
  if (text == nullptr) return nullptr;
  PyObject* bytes = name_bytes(text);
  Py_DECREF(text);
  if (bytes == nullptr) return nullptr;
  if (PyDict_GET_SIZE(cache) >= kNameCacheSize) PyDict_Clear(cache);
  if (PyDict_SetItem(cache, obj, bytes) < 0) {
    Py_DECREF(bytes);
    return nullptr;
  }
  return bytes;
}

/// The identity cache: names that are not compact ASCII str (other str, any other object) ->
/// the bytes laptime records for them, direct-mapped by the object's address, so that a name used
/// again costs no UTF-8 conversion, no str() and no hash. An entry holds a reference to its name
/// object: while cached, the object is alive, and no other object can be at its address. The
/// bytes are the str's own UTF-8 buffer, or a bytes object (fallback_name) held by the entry.
/// Shared by all interpreters: an entry is found by address alone, which runs no Python code, and
/// only by an interpreter that holds its very object. Replacing an entry of another interpreter
/// leaves its objects alive: that interpreter may have ended, and freeing its objects then crashes
/// CPython 3.12.1 (_laptime.cpp).
struct IdentityName {
  PyObject* key;    // strong
  PyObject* owner;  // strong: the object whose buffer `text` is (the str itself, or bytes)
  std::string_view text;
  std::int64_t interpreter;  // the ID of the interpreter that made the entry
};
constexpr std::size_t kIdentityNameBits = 8;
IdentityName g_identity_names[std::size_t{1} << kIdentityNameBits];

LAPTIME_ALWAYS_INLINE IdentityName& identity_entry(PyObject* obj) {
  const std::uint64_t key = reinterpret_cast<std::uintptr_t>(obj) >> 4;
  return g_identity_names[(key * 0x9e3779b97f4a7c15ULL) >> (64 - kIdentityNameBits)];
}

}  // namespace

/// utf8_view of a str that is not compact ASCII. One with lone surrogates has no UTF-8 form and
/// would raise (an exception object, ~1 µs) on every call: once converted by fallback_name, its
/// bytes are found in the name cache first. Lone surrogates make a str 2- or 4-byte wide, so
/// Latin-1 names skip the lookup.
LAPTIME_NOINLINE bool utf8_view_other(PyObject* str, std::string_view& out, PyObject** owner) {
#if PY_VERSION_HEX < 0x030C0000
  if (PyUnicode_READY(str) < 0) return false;  // a legacy str made by the deprecated C API
#endif
  if (PyUnicode_KIND(str) != PyUnicode_1BYTE_KIND) {
    PyObject* cache = name_cache();
    if (cache == nullptr) return false;
    if (PyObject* bytes = PyDict_GetItemWithError(cache, str)) {  // kept alive by the cache
      out = std::string_view(PyBytes_AS_STRING(bytes),
                             static_cast<std::size_t>(PyBytes_GET_SIZE(bytes)));
      if (owner != nullptr) *owner = bytes;
      return true;
    }
    if (PyErr_Occurred()) return false;
  }
  Py_ssize_t size = 0;
  const char* data = PyUnicode_AsUTF8AndSize(str, &size);
  if (data == nullptr) return false;
  out = std::string_view(data, static_cast<std::size_t>(size));
  if (owner != nullptr) *owner = str;
  return true;
}

[[gnu::cold]] PyObject* not_a_str(const char* call, PyObject* arg) {
  PyErr_Format(PyExc_TypeError, "laptime: %s: the name must be a str, not %.100s", call,
               Py_TYPE(arg)->tp_name);
  return nullptr;
}

/// Whether `obj` can be a name (a str, or hashable); clears the error of the check.
bool usable_name(PyObject* obj) {
  if (PyUnicode_Check(obj) || PyObject_Hash(obj) != -1) return true;
  PyErr_Clear();
  return false;
}

/// A str from bytes that may not be valid UTF-8 (names given in C++ can be anything, and a file
/// name recorded from Python keeps its original bytes): an invalid byte shows as `\xe9`, as
/// `ls -b` shows it, and the text stays printable on any stream.
PyObject* text_to_str(std::string_view text) {
  return PyUnicode_DecodeUTF8(text.data(), static_cast<Py_ssize_t>(text.size()),
                              "backslashreplace");
}

/// The name of `arg` when it is not a compact ASCII str: the identity cache, else the str's
/// UTF-8 (utf8_view_other) or, for a str without one and any other object, fallback_name. Sets
/// `name` to the bytes of the returned object (a new reference that keeps them alive; nullptr
/// with an exception set). Out of line, so that the hot methods stay small.
LAPTIME_NOINLINE PyObject* other_name(const char* call, PyObject* arg, std::string_view& name) {
  IdentityName& e = identity_entry(arg);
  if (e.key == arg) {
    name = e.text;
    return Py_NewRef(e.owner);
  }
  PyObject* owner = nullptr;
  if (PyUnicode_Check(arg)) {
    // The owner of the bytes: the str, or the cache's bytes for one with lone surrogates (the
    // entry must keep those alive itself: the cache starts over when full).
    PyObject* buffer_owner = nullptr;
    if (utf8_view_other(arg, name, &buffer_owner)) {
      owner = Py_NewRef(buffer_owner);
    } else if (!PyErr_ExceptionMatches(PyExc_UnicodeEncodeError)) {
      return nullptr;
    } else {
      PyErr_Clear();  // a str with lone surrogates
    }
  }
  if (owner == nullptr) {
    owner = fallback_name(call, arg);
    if (owner == nullptr) return nullptr;
    name = std::string_view(PyBytes_AS_STRING(owner),
                            static_cast<std::size_t>(PyBytes_GET_SIZE(owner)));
  }
  const std::int64_t here = interpreter_id();
  const IdentityName old = e;
  e = IdentityName{Py_NewRef(arg), Py_NewRef(owner), name, here};
  if (old.interpreter == here) {
    Py_XDECREF(old.key);  // last: a __del__ may run, and call laptime again
    Py_XDECREF(old.owner);
  }
  return owner;
}

/// `f(name)` for the name `arg` of `call`: a compact ASCII str is read in place (its bytes are
}  // namespace pyext
