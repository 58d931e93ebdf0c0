# `genie replay` tests (tools/replay/tests/replay_case.sh), included from
# tests/CMakeLists.txt. The Chakra test data lies beside the source tree.
set(GENIE_CHAKRA_TESTDATA ${PROJECT_SOURCE_DIR}/../shared/testdata/chakra CACHE PATH
  "Chakra execution traces for the replay tests")
# Each case is NAME|ARG:ARG:... (replay_case.sh's arguments).
set(replay_script ${PROJECT_SOURCE_DIR}/tools/replay/tests/replay_case.sh)
set(replay_cases
  "testdata_all_gather|testdata:microbench_4npus/all_gather/all_gather:microbench_4npus/Ring_4chunks.json"
  "testdata_all_reduce|testdata:microbench_4npus/all_reduce/all_reduce:microbench_4npus/Ring_4chunks.json"
  "testdata_all_to_all|testdata:microbench_4npus/all_to_all/all_to_all:microbench_4npus/Ring_4chunks.json"
  "testdata_reduce_scatter|testdata:microbench_4npus/reduce_scatter/reduce_scatter:microbench_4npus/Ring_4chunks.json"
  "testdata_genie_allgather|testdata:genie_allgather/ALL_GATHER:genie_allgather/system.json:genie_allgather/logical_topology_4.json:genie_allgather/remote_memory.json"
  "testdata_genie_allgather_2chunk|testdata:genie_allgather/ALL_GATHER:genie_allgather/system_2chunk.json:genie_allgather/logical_topology_4.json"
  "testdata_genie_allgather_replayonly|testdata:genie_allgather/ALL_GATHER:genie_allgather/system_2chunk_replayonly.json:genie_allgather/logical_topology_4.json"
  "algo_ring|algo:ring" "algo_direct|algo:direct" "algo_halving_doubling|algo:halvingDoubling"
  "algo_double_binary_tree|algo:doubleBinaryTree"
  "p2p|p2p" "corrupt|corrupt" "outputs|outputs" "bad_input|bad" "deadlock|deadlock"
  "unmatched_send|unmatched_send" "policy|policy" "threads|threads" "pipelined|pipelined" "prewarm|prewarm" "staged|staged" "compute_real|compute_real" "ucx|ucx" "dpdk|dpdk" "mpi|mpi" "rendezvous|rendezvous" "bench_quick|bench"
  "converter|converter" "ctrl_deps|ctrl_deps" "astra_cli|astra_cli" "mismatch|mismatch" "comm_groups|comm_groups"
  "custom|custom")
foreach(c ${replay_cases})
  string(REPLACE "|" ";" parts "${c}")
  string(REPLACE ":" ";" parts "${parts}")
  list(GET parts 0 name)
  list(REMOVE_AT parts 0)
  add_test(NAME replay.${name} COMMAND bash ${replay_script} ${parts})
  set_tests_properties(replay.${name} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600
    ENVIRONMENT "GENIE_BUILD_DIR=${PROJECT_BINARY_DIR};GENIE_SOURCE_DIR=${PROJECT_SOURCE_DIR};CHAKRA_TESTDATA=${GENIE_CHAKRA_TESTDATA};GENIE_SANITIZE=$<BOOL:${GENIE_SANITIZE}>")
endforeach()

# GoogleTest programs of replay's parts (tools/replay/tests/NAME.cpp and
# the replay sources named), on the static library beneath them.
function(replay_gtest name timeout)
  list(TRANSFORM ARGN PREPEND ${PROJECT_SOURCE_DIR}/tools/replay/)
  add_executable(replay_${name} ${PROJECT_SOURCE_DIR}/tools/replay/tests/${name}.cpp ${ARGN})
  target_include_directories(replay_${name} PRIVATE ${PROJECT_SOURCE_DIR}/tools/replay ${PROJECT_SOURCE_DIR}/src
    ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR})
  target_compile_options(replay_${name} PRIVATE ${GENIE_WARNINGS})
  target_link_libraries(replay_${name} PRIVATE genie_static GTest::gtest GTest::gtest_main)
  gtest_discover_tests(replay_${name} TEST_PREFIX "replay." DISCOVERY_TIMEOUT 60 NO_PRETTY_VALUES
    PROPERTIES TIMEOUT ${timeout})
endfunction()
# The data plane on its own.
replay_gtest(fabric_test 120 fabric.cpp)
# What replay reads from traces and files from the wild: converter metadata,
# repaired dependencies, ASTRA-sim's network file and communicator groups.
replay_gtest(input_test 60 chakra.cpp repair.cpp config.cpp)
