# CUDA backend tests (included from tests/CMakeLists.txt when the plugin is
# built). GoogleTest programs over the internal layers and the C API; those
# needing a GPU skip with the reason where the backend is unavailable.
foreach(t cuda_backend_test cuda_gpu_test)
  add_executable(${t} ${CMAKE_CURRENT_SOURCE_DIR}/cuda/${t}.cpp)
  foreach(l ${GENIE_LAYERS})
    target_link_libraries(${t} PRIVATE genie_${l})
  endforeach()
  target_link_libraries(${t} PRIVATE GTest::gtest GTest::gtest_main)
  target_include_directories(${t} PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/unit)
  target_compile_options(${t} PRIVATE ${GENIE_WARNINGS} -Werror)
  target_compile_definitions(${t} PRIVATE GENIE_CUDA_PLUGIN_DIR="${PROJECT_BINARY_DIR}")
  add_dependencies(${t} genie_backend_cuda)
  gtest_discover_tests(${t} TEST_PREFIX "cuda." DISCOVERY_TIMEOUT 60 NO_PRETTY_VALUES PROPERTIES TIMEOUT 600)
endforeach()

# A driver library that reports one device (cuda_backend_test: the plugin
# hands over to the backend).
add_library(cuda_fake_driver SHARED ${CMAKE_CURRENT_SOURCE_DIR}/cuda/fake_driver.c)
set_target_properties(cuda_fake_driver PROPERTIES OUTPUT_NAME cuda SOVERSION 1
  LIBRARY_OUTPUT_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}/fake-cuda-driver)
target_compile_definitions(cuda_backend_test PRIVATE GENIE_FAKE_CUDA_DRIVER="$<TARGET_FILE:cuda_fake_driver>")
add_dependencies(cuda_backend_test cuda_fake_driver)

# Models on cuda:0 against the CPU through the C API (exit 77 = skipped).
add_executable(cuda_models_test ${CMAKE_CURRENT_SOURCE_DIR}/cuda/cuda_models_test.c)
target_compile_options(cuda_models_test PRIVATE -Wall -Wextra -Werror -Wno-unused-function)
target_link_libraries(cuda_models_test PRIVATE genie m Threads::Threads)
add_dependencies(cuda_models_test genie_backend_cuda)
add_test(NAME cuda.models_test COMMAND cuda_models_test)
set_tests_properties(cuda.models_test PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600
  ENVIRONMENT "GENIE_DEVICE_BACKEND_PATH=${PROJECT_BINARY_DIR}")
