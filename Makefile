# The two commands users run: `make demo` and `make test`.
# Both install missing Debian packages first (scripts/install-deps.sh).

BUILD      ?= build
TEST_BUILD ?= build-test
REL_TEST_BUILD ?= build-release-test
JOBS       ?= $(shell nproc)
CMAKE_GEN  := $(shell command -v ninja >/dev/null 2>&1 && echo "-G Ninja")
# The generator for build directory $(1): Ninja where it is installed, for a
# directory not configured yet. One configured before (say by a plain
# `cmake -S . -B build`) keeps its own, which CMake cannot change.
gen = $(if $(wildcard $(1)/CMakeCache.txt),,$(CMAKE_GEN))

FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 60

.PHONY: all deps pyenv build demo test test-build test-release fuzz clean

all: build

deps:
	@scripts/install-deps.sh

# The Python environment of the PyTorch frontends' tests: PyTorch 2 from
# PyPI, pinned in bindings/python/requirements-torch.txt, in a virtual
# environment made once and reused (scripts/python-env.sh).
pyenv: deps
	@scripts/python-env.sh >/dev/null

# Optimised build for the demo and benchmarks.
build: deps
	@cmake -S . -B $(BUILD) $(call gen,$(BUILD)) -DCMAKE_BUILD_TYPE=Release -DGENIE_BUILD_TESTS=OFF >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

demo: build
	@scripts/demo.sh $(BUILD)

# Every test, built with AddressSanitizer, UBSan and LeakSanitizer.
test-build: deps
	@cmake -S . -B $(TEST_BUILD) $(call gen,$(TEST_BUILD)) -DCMAKE_BUILD_TYPE=Debug -DGENIE_SANITIZE=ON >/dev/null
	@cmake --build $(TEST_BUILD) -j $(JOBS)

# UCX's memory hooks (UCX_MEM_EVENTS) and LeakSanitizer's exit-time scan
# do not mix: the sanitized run turns the hooks off (tests/lsan.supp). The
# CUDA driver maps memory where AddressSanitizer's shadow gap would be, so
# the gap is left unprotected.
test: test-build pyenv
	@cd $(TEST_BUILD) && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:allocator_may_return_null=1:protect_shadow_gap=0 \
	  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  LSAN_OPTIONS=suppressions=$(CURDIR)/tests/lsan.supp UCX_MEM_EVENTS=no \
	  ctest --output-on-failure -j $(JOBS)

# The same tests against an optimised build (-O3, no sanitizers): warnings
# and behaviour that only optimisation brings out. CI runs it after `test`.
# The fuzz harnesses are their own clang build, the same whichever build
# runs them: `test` has run them already.
test-release: deps pyenv
	@cmake -S . -B $(REL_TEST_BUILD) $(call gen,$(REL_TEST_BUILD)) -DCMAKE_BUILD_TYPE=Release -DGENIE_BUILD_TESTS=ON >/dev/null
	@cmake --build $(REL_TEST_BUILD) -j $(JOBS)
	@cd $(REL_TEST_BUILD) && ctest --output-on-failure -j $(JOBS) -E '^sh\.fuzz_test$$'

# libFuzzer harnesses (fuzz/), built with clang in their own directory, each
# run for FUZZ_SECONDS.
fuzz: deps
	@scripts/fuzz.sh $(FUZZ_BUILD) $(FUZZ_SECONDS)

clean:
	rm -rf $(BUILD) $(TEST_BUILD) $(REL_TEST_BUILD) $(FUZZ_BUILD)
