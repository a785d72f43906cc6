# cmake -DSOURCE_DIR=... -DWORK=... -DGENERATOR=... -DCXX=... -DMODE=find_package|add_subdirectory
#       -P run_consumer.cmake
include(${CMAKE_CURRENT_LIST_DIR}/run_command.cmake)

file(REMOVE_RECURSE ${WORK})
set(consumer_dir ${SOURCE_DIR}/tests/consumers/${MODE})
set(options -DLAPTIME_BUILD_TESTS=OFF -DLAPTIME_BUILD_BENCH=OFF -DLAPTIME_BUILD_EXAMPLES=OFF)
if(MODE STREQUAL "find_package")
  # Build and install laptime alone, as a user would, into a private prefix.
  run(${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${WORK}/laptime-build -G ${GENERATOR}
      -DCMAKE_CXX_COMPILER=${CXX} -DCMAKE_INSTALL_PREFIX=${WORK}/prefix ${options})
  run(${CMAKE_COMMAND} --build ${WORK}/laptime-build)
  run(${CMAKE_COMMAND} --install ${WORK}/laptime-build)
  run(${CMAKE_COMMAND} -S ${consumer_dir} -B ${WORK}/consumer-build -G ${GENERATOR}
      -DCMAKE_CXX_COMPILER=${CXX} -DCMAKE_PREFIX_PATH=${WORK}/prefix)
else()
  run(${CMAKE_COMMAND} -S ${consumer_dir} -B ${WORK}/consumer-build -G ${GENERATOR}
      -DCMAKE_CXX_COMPILER=${CXX} -DLAPTIME_SOURCE_DIR=${SOURCE_DIR})
endif()
run(${CMAKE_COMMAND} --build ${WORK}/consumer-build)
run(${WORK}/consumer-build/consumer)
if(NOT last_output MATCHES "\"iterations_measured\": 2")
  message(FATAL_ERROR "consumer output unexpected: ${last_output}")
endif()
message(STATUS "${MODE} consumer OK")
