// Arguments and errors of the extension's calls: C++ exceptions -> Python ones, the one-argument
// parsing of the vectorcall methods (out of line: the hot methods read one positional argument
// themselves), numbers of iterations, CUDA stream handles, writing to a Python file object.
#include "extension.hpp"

#include <climits>
#include <cmath>
#include <new>

namespace pyext {

/// Turns the C++ exception being handled into a Python one; returns nullptr. Only in a catch.
[[gnu::cold]] PyObject* set_python_error() {
  try {
    throw;
  } catch (const laptime::UsageError& e) {
    if (PyObject* message = text_to_str(e.what())) {
      PyErr_SetObject(g_usage_error, message);
      Py_DECREF(message);
    }
  } catch (const std::bad_alloc&) {
    PyErr_NoMemory();
  } catch (const std::exception& e) {
    PyErr_Format(PyExc_RuntimeError, "laptime: %s", e.what());
  } catch (...) {
    PyErr_SetString(PyExc_RuntimeError, "laptime: unknown C++ exception");
  }
  return nullptr;
}

/// The one argument of `call(keyword)` (`required`) or `call(keyword=None)` from a vectorcall,
/// positional or by keyword (also spelled `alias`, where not null); nullptr if absent. False
/// (TypeError set) for anything else.
[[gnu::cold]] bool parse_one_arg(const char* call, const char* keyword, const char* alias,
                                 bool required, PyObject* const* args, Py_ssize_t nargs,
                                 PyObject* kwnames, PyObject*& out) {
  out = nargs > 0 ? args[0] : nullptr;
  const Py_ssize_t nkw = kwnames != nullptr ? PyTuple_GET_SIZE(kwnames) : 0;
  bool ok = nargs + nkw <= 1;
  if (ok && nkw == 1) {
    PyObject* key = PyTuple_GET_ITEM(kwnames, 0);
    ok = PyUnicode_CompareWithASCIIString(key, keyword) == 0 ||
         (alias != nullptr && PyUnicode_CompareWithASCIIString(key, alias) == 0);
    out = args[nargs];
  }
  if (!ok || (required && out == nullptr)) {
    PyErr_Format(PyExc_TypeError,
                 required ? "laptime: %s() takes one argument, %s"
                          : "laptime: %s() takes at most one argument, %s=None",
                 call, keyword);
    return false;
  }
  return true;
}

/// `call(keyword=None)`.
bool optional_arg(const char* call, const char* keyword, PyObject* const* args, Py_ssize_t nargs,
                  PyObject* kwnames, PyObject*& out) {
  return parse_one_arg(call, keyword, nullptr, false, args, nargs, kwnames, out);
}

[[gnu::cold]] PyObject* required_arg(const char* call, const char* keyword, PyObject* const* args,
                                     Py_ssize_t nargs, PyObject* kwnames) {
  PyObject* out = nullptr;
  return parse_one_arg(call, keyword, nullptr, true, args, nargs, kwnames, out) ? out : nullptr;
}

/// A number of iterations: an int (also a bool, which the seed's arithmetic took as 0 or 1, and
/// anything with __index__) or a float with an integral value (5.0, as configuration files give
/// numbers; also what converts to one, numpy.float32(5.0)), within int. False with TypeError,
/// ValueError or OverflowError set.
bool iteration_count(const char* keyword, PyObject* obj, int& out) {
  const PyNumberMethods* nb = Py_TYPE(obj)->tp_as_number;
  if (PyFloat_Check(obj) || (!PyIndex_Check(obj) && nb != nullptr && nb->nb_float != nullptr)) {
    PyObject* as_float = PyNumber_Float(obj);
    if (as_float == nullptr) return false;
    const double d = PyFloat_AS_DOUBLE(as_float);
    Py_DECREF(as_float);
    if (!std::isfinite(d) || d != std::floor(d)) {
      PyErr_Format(PyExc_ValueError, "laptime: enable(): %s=%R is not a whole number", keyword,
                   obj);
      return false;
    }
    if (d < INT_MIN || d > INT_MAX) {
      PyErr_Format(PyExc_OverflowError, "laptime: enable(): %s is out of range", keyword);
      return false;
    }
    out = static_cast<int>(d);
    return true;
  }
  if (!PyIndex_Check(obj)) {
    PyErr_Format(PyExc_TypeError, "laptime: enable(): %s must be an int, not %.100s", keyword,
                 Py_TYPE(obj)->tp_name);
    return false;
  }
  PyObject* index = PyNumber_Index(obj);
  if (index == nullptr) return false;
  int overflow = 0;
  const long v = PyLong_AsLongAndOverflow(index, &overflow);
  Py_DECREF(index);
  if (v == -1 && PyErr_Occurred()) return false;
  if (overflow != 0 || v < INT_MIN || v > INT_MAX) {
    PyErr_Format(PyExc_OverflowError, "laptime: enable(): %s is out of range", keyword);
    return false;
  }
  out = static_cast<int>(v);
  return true;
}

/// A CUDA stream handle: None (the legacy default stream), an int (a cudaStream_t as integer),
/// or an object with an int attribute `cuda_stream` (torch.cuda.Stream; torch is not imported).
bool stream_handle(PyObject* obj, void*& out) {
  out = nullptr;
  if (obj == nullptr || obj == Py_None) return true;
  PyObject* value = nullptr;
  if (PyLong_Check(obj)) {
    value = Py_NewRef(obj);
  } else {
    value = PyObject_GetAttrString(obj, "cuda_stream");
    if (value == nullptr) {
      if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return false;
      PyErr_Clear();
    }
  }
  if (value == nullptr) {
    PyErr_Format(PyExc_TypeError,
                 "laptime: a CUDA stream is None, an int handle or an object with an int "
                 "attribute 'cuda_stream' (torch.cuda.Stream), not %.100s",
                 Py_TYPE(obj)->tp_name);
    return false;
  }
  out = PyLong_AsVoidPtr(value);
  Py_DECREF(value);
  return !(out == nullptr && PyErr_Occurred());
}

namespace {
bool write_str(PyObject* file, std::string_view text) {
  PyObject* str = text_to_str(text);
  if (str == nullptr) return false;
  PyObject* r = PyObject_CallMethod(file, "write", "O", str);
  Py_DECREF(str);
  Py_XDECREF(r);
  return r != nullptr;
}

/// `text` with laptime's one non-ASCII symbol, the µ of µs, written "us".
std::string with_ascii_units(std::string_view text) {
  std::string out;
  for (std::size_t i = 0; i < text.size();) {
    if (text.compare(i, 3, "\xC2\xB5s") == 0) {
      out += "us";
      i += 3;
    } else {
      out += text[i++];
    }
  }
  return out;
}

/// Writes `text` with what the stream's encoding (`file.encoding`, else ASCII) cannot hold as
/// backslash escapes, as print() to a stream opened with errors="backslashreplace" would.
bool write_escaped(PyObject* file, std::string_view text) {
  PyObject* str = text_to_str(text);
  if (str == nullptr) return false;
  std::string encoding = "ascii";
  if (PyObject* e = PyObject_GetAttrString(file, "encoding")) {
    if (PyUnicode_Check(e)) {
      if (const char* u = PyUnicode_AsUTF8(e)) encoding = u;
    }
    Py_DECREF(e);
  }
  PyErr_Clear();
  PyObject* bytes = PyUnicode_AsEncodedString(str, encoding.c_str(), "backslashreplace");
  if (bytes == nullptr) {  // an encoding Python does not know: ASCII holds the escapes
    PyErr_Clear();
    encoding = "ascii";
    bytes = PyUnicode_AsEncodedString(str, encoding.c_str(), "backslashreplace");
  }
  Py_DECREF(str);
  if (bytes == nullptr) return false;
  PyObject* escaped = PyUnicode_Decode(PyBytes_AS_STRING(bytes), PyBytes_GET_SIZE(bytes),
                                       encoding.c_str(), "strict");
  Py_DECREF(bytes);
  if (escaped == nullptr) return false;
  PyObject* r = PyObject_CallMethod(file, "write", "O", escaped);
  Py_DECREF(escaped);
  Py_XDECREF(r);
  return r != nullptr;
}
}  // namespace

/// Writes `text` to the Python file object `file` and flushes it; false with an exception set.
/// What print() accepts is enough: an object with write() alone (a logger's tee) is not flushed,
/// a stream that cannot encode µ (an ASCII locale) gets "us" for it, and a name it cannot encode
/// is written escaped (a report is never lost, nor raised, for a name's letters).
bool write_to(PyObject* file, std::string_view text) {
  if (!write_str(file, text)) {
    if (!PyErr_ExceptionMatches(PyExc_UnicodeEncodeError)) return false;
    PyErr_Clear();
    const std::string ascii = with_ascii_units(text);
    if (!write_str(file, ascii)) {
      if (!PyErr_ExceptionMatches(PyExc_UnicodeEncodeError)) return false;
      PyErr_Clear();
      if (!write_escaped(file, ascii)) return false;
    }
  }
  PyObject* flush = PyObject_GetAttrString(file, "flush");
  if (flush == nullptr) {
    if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return false;
    PyErr_Clear();
    return true;
  }
  PyObject* r = PyObject_CallObject(flush, nullptr);
  Py_DECREF(flush);
  Py_XDECREF(r);
  return r != nullptr;
}
/// d[key] = value, stealing `value`; false with an exception set.
bool set_item(PyObject* d, const char* key, PyObject* value) {
  if (value == nullptr) return false;
  const int r = PyDict_SetItemString(d, key, value);
  Py_DECREF(value);
  return r == 0;
}
}  // namespace pyext
