# `make bench` and `make test` set themselves up: .venv is made from requirements.txt on first use.
# With PY=python3 (any interpreter) they use that environment as it is and install nothing.
VENV := .venv
PY ?= $(VENV)/bin/python
WORKLOAD ?=
DATA ?=
ARGS ?=

# CPU=avx2, CPU=avx512bf16 (AVX-512-BF16 without AMX) or CPU=bf16 (with AMX): the tests (make test, test-fast) run as a machine of that class would, whatever this one is:
# its flags stand for /proc/cpuinfo's (CPUINFO_FLAGS, read by the scripts and the bench alike); CPU=other names the
# class this machine is not (.ci/run runs make test-fast so, after make test: a test that assumes one class fails)
CPU_avx2 := fpu sse2 avx avx2 fma
CPU_avx512bf16 := fpu sse2 avx avx2 fma avx512f avx512bw avx512_bf16
CPU_bf16 := fpu sse2 avx avx2 fma avx512f avx512bw avx512_bf16 amx_bf16
NATIVE_BF16_HERE = $(shell grep -q -w -E 'avx512_bf16|amx_bf16|bf16' /proc/cpuinfo 2>/dev/null && echo yes)
CPU_CLASS = $(if $(filter other,$(CPU)),$(if $(NATIVE_BF16_HERE),avx2,bf16),$(CPU))
ifneq ($(CPU),)
ifeq ($(filter avx2 avx512bf16 bf16 other,$(CPU)),)
$(error CPU=$(CPU): choose avx2, avx512bf16, bf16 or other)
endif
export CPUINFO_FLAGS = $(CPU_$(CPU_CLASS))
endif
# make test's pass as the other class: the class its passes ran as (CPU's, else this machine's), turned over
RAN_AS = $(or $(CPU_CLASS),$(if $(NATIVE_BF16_HERE),bf16,avx2))
OTHER_CLASS = $(if $(filter avx2,$(RAN_AS)),bf16,avx2)

# the oldest torch CI tests (requirements.txt): its wheels alone (they import beside .venv's CUDA 13 libraries and
# train on a CPU), in a folder of their own that make test puts first on PYTHONPATH for the scripts' tests
OLDEST := torch==2.11.0 torchvision==0.26.0
OLDEST_DIR := .torch-2.11

ifeq ($(PY),$(VENV)/bin/python)
SETUP := $(VENV)/.installed
OLDEST_SETUP := $(OLDEST_DIR)/.installed
endif

.PHONY: bench compare check tune-loader baseline plot train data diff test test-fast mutate lint format clean browser slurm

# the main job: every variant on the same work; tables and plots in results/ (ARGS="..." for python -m bench)
# WORKLOAD=small|imagenet|all (generated in data/ when missing), or DATA=folder of your own
bench: $(SETUP)
	$(PY) -m bench $(if $(WORKLOAD),--workload $(WORKLOAD)) $(if $(DATA),--data $(DATA)) $(ARGS)

# a quick answer for one technique (or a few): V=amp or V=amp,compile against the baseline, paired, in rounds until
# settled or the budget spent: 5 minutes, 10 where nvidia-smi lists a GPU (3 rounds of any technique's pair by the
# GPU plan's costs; one workload there, the one the techniques belong to); results/compare/; ARGS="--budget 20"
COMPARE_MIN = $(if $(shell nvidia-smi -L 2>/dev/null),10,5)
# V reaches the shell as its environment's V (make exports a variable set on its command line), never pasted into the
# recipe's text: "V=amp;cmd" is a bad variant's name, said in one line, not a command run
compare: $(SETUP)
	@case "$$V" in ""|*baseline*) echo "usage: make compare V=amp (or V=amp,compile: any of make bench's variants but baseline)" >&2; exit 2 ;; \
	  *[!A-Za-z0-9_:,+-]*) echo "make compare: V=$$V: a variant's name holds letters, digits and _ : , + - alone (python -m bench --help lists them)" >&2; exit 2 ;; esac
	$(PY) -m bench --variants "baseline,$$V" --loaders none --budget $(COMPARE_MIN) --out results/compare $(if $(WORKLOAD),--workload $(WORKLOAD)) $(if $(DATA),--data $(DATA)) $(ARGS)

# does every technique work on this machine? a short run of every script and path, a table of what works (3-4 min)
check: $(SETUP)
	$(PY) -m bench --check $(ARGS)

# the loader's settings for this machine: the loader alone at each setting, then the best few in training, paired
tune-loader: $(SETUP)
	$(PY) -m bench --tune-loader $(if $(WORKLOAD),--workload $(WORKLOAD)) $(if $(DATA),--data $(DATA)) $(ARGS)

# keep results/ as the saved baseline for this class of machine (baseline/<machine class>/)
baseline: $(SETUP)
	$(PY) -m bench --save-baseline $(ARGS)

# tables and plots again from the last bench in results/runs.csv
plot: $(SETUP)
	$(PY) -m bench --summarize $(ARGS)

$(VENV)/.installed: requirements.txt
	@echo "installing requirements.txt into $(VENV) (once; about two minutes and 7 GB of disk)"
	@free=$$(df -Pk . | awk 'NR==2 {print int($$4 / 1048576)}'); [ "$$free" -ge 8 ] || \
	  echo "make: warning: $$free GB free on this disk; the install may stop with 'No space left on device'" >&2
	python3 -m venv $(VENV)
	@# no copy of the downloaded wheels kept in pip's cache as well (where pip downloads them)
	$(VENV)/bin/python -m pip install -qq --no-cache-dir --upgrade pip
	$(VENV)/bin/python -m pip install -qq --no-cache-dir -r requirements.txt
	touch $@

$(OLDEST_DIR)/.installed: $(SETUP)
	@echo "installing $(OLDEST) into $(OLDEST_DIR) (once; 1.2 GB of disk) for the scripts' tests on the oldest torch"
	@free=$$(df -Pk . | awk 'NR==2 {print int($$4 / 1048576)}'); [ "$$free" -ge 2 ] || \
	  echo "make: warning: $$free GB free on this disk; the install may stop with 'No space left on device'" >&2
	rm -rf $(OLDEST_DIR)
	$(PY) -m pip install -qq --no-cache-dir --no-deps --target $(OLDEST_DIR) $(OLDEST)
	touch $@

# the generated data of a workload (small by default), made when missing or made with other parameters
data: $(SETUP)
	$(PY) -m bench.data --workload $(or $(WORKLOAD),small)

train: $(SETUP)
	$(if $(DATA),,$(PY) -m bench.data --workload small)
	$(PY) train.py --data $(or $(DATA),data/small) $(ARGS)

# the tutorial: a variant against its base, every added line marked `# new #`
diff:
	@pair=$$(python3 -m bench.catalogue diff "$(V)") || exit 2; \
	diff -u $$pair; test $$? -le 1

# the browser the report's test opens: Debian's chromium and chromium-driver, installed when missing (as root, or sudo)
browser:
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null || { \
	  echo "installing Debian's chromium and chromium-driver for the report's browser test"; \
	  sudo=$$([ "$$(id -u)" = 0 ] || echo sudo); \
	  $$sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -qq chromium chromium-driver >/dev/null; }

# the one-node Slurm that tests/e2e/test_slurm_job.py brings up: Debian's slurm-wlm and munge, installed when missing (as root)
slurm:
	@test -x /usr/sbin/slurmd && test -x /usr/sbin/munged || { \
	  echo "installing Debian's slurm-wlm and munge for the Slurm test (a one-node cluster, started by the test)"; \
	  sudo=$$([ "$$(id -u)" = 0 ] || echo sudo); \
	  $$sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -qq slurm-wlm munge >/dev/null; }

# every test (CI runs this), in passes: every test not marked alone on TEST_WORKERS processes of one thread each
# (pytest-xdist, where the interpreter has it: two processes of two threads on two cores slow each other down), an
# end-to-end test (tests/e2e/) kept to its worker's share of the cores (tests/suite.py: a bench plans its runs'
# threads for the cores it may use; the tests of one xdist_group, the Slurm cluster's, on one worker), then the tests
# marked alone (a load a bench measures, a race counted, a wait timed, a process per core: they need the machine to
# themselves), then the fast tests whose code read the CPU's flags (checks.cpu_flags, machine.cpu_flags: each
# marks its test's file in results/tests/cpu-flags-read/) again as a CPU of the other class, then the
# scripts' tests (marked torches) again on the oldest torch tested. test-fast leaves out the slow ones (torchrun,
# whole benches, limits, Slurm) and the second torch. Each pass prints its 25 slowest tests and keeps every test's
# durations in results/tests/durations-PASS.csv. The tests' compile cache (results/tests/compile-cache) is emptied first:
# every make test compiles cold first, as CI's fresh clone does.
TEST_WORKERS ?= 2
XDIST = $(shell $(PY) -c "import xdist" 2>/dev/null && [ "$(TEST_WORKERS)" -gt 1 ] && echo "-n $(TEST_WORKERS)")
SPREAD = $(if $(XDIST),OMP_NUM_THREADS=1 )
XDIST_GROUPS = $(if $(XDIST),$(XDIST) --dist loadgroup)
# a pass: $(1) its name, $(2) what precedes pytest, $(3) pytest's arguments; one that collects nothing fails, unless
# ARGS chose the tests
PASS = echo "make test: the pass $(1)"; TESTS_PASS=$(1) $(2) $(PY) -m pytest $(3) $(ARGS); rc=$$?; \
	if [ $$rc -eq 5 ] && [ -n "$(strip $(ARGS))" ]; then rc=0; \
	elif [ $$rc -eq 5 ]; then echo "make test: pytest collected no tests in the pass $(1): that is a failure here"; fi; \
	[ $$rc -eq 0 ] || exit $$rc
OLDEST_TORCH = $(word 2,$(subst ==, ,$(word 1,$(OLDEST))))

test: $(SETUP) lint browser slurm $(OLDEST_SETUP)
	@rm -rf results/tests/cpu-flags-read results/tests/compile-cache; \
	$(call PASS,parallel,$(SPREAD)TESTS_SHARE_CORES=1,$(XDIST_GROUPS) -m "not alone" --durations=25 tests); \
	$(call PASS,alone,,-m alone --durations=25 tests); \
	$(call PASS,as-$(OTHER_CLASS),$(SPREAD)TESTS_CPU_READERS=1 CPUINFO_FLAGS="$(CPU_$(OTHER_CLASS))",$(XDIST) -m "not slow" --durations=10 tests); \
	if [ -n "$(OLDEST_SETUP)" ]; then export PYTHONPATH=$(OLDEST_DIR) TESTS_TORCH=$(OLDEST_TORCH); \
	  $(call PASS,torch-$(OLDEST_TORCH),$(SPREAD),$(XDIST) -m torches --durations=10 tests); fi

test-fast: $(SETUP) lint browser
	@$(if $(CPU),echo "make test-fast: as a CPU of class $(CPU_CLASS) would run it (CPUINFO_FLAGS=$$CPUINFO_FLAGS)";) \
	$(call PASS,fast$(if $(CPU),-as-$(CPU_CLASS)),$(SPREAD),$(XDIST) -m "not slow" --durations=25 tests)

# mutation testing of the rules an answer depends on, each module against its own tests (tools/mutate.py; the scores
# and what survives: docs/tests.md): mutmut, pinned here and installed on first use (only this target needs it, and
# .ci/run does not run it); ARGS="--module epochs" for one module
MUTMUT := 3.8.1
mutate: $(SETUP)
	@$(PY) -c "import importlib.metadata as m; assert m.version('mutmut') == '$(MUTMUT)'" 2>/dev/null || \
	  $(PY) -m pip install -q mutmut==$(MUTMUT)
	$(PY) tools/mutate.py $(ARGS)

lint: $(SETUP)
	$(PY) -m ruff format --check .
	$(PY) -m ruff check .

format: $(SETUP)
	$(PY) -m ruff format .
	$(PY) -m ruff check --fix .

clean:
	rm -rf $(VENV) $(OLDEST_DIR) data .pytest_cache .ruff_cache
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
