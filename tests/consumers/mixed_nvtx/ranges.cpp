// The same as data.cpp, compiled with the NVTX headers like main.cpp: a program of one kind.
#include <laptime/laptime.hpp>

void load_batch() {
  LAPTIME_RANGE("load batch");
}
