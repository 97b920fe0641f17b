# Top-level commands. `make demo` and `make test` install the Debian packages they need first
# (idempotent), so that both work on a fresh Debian 12 machine.
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=
PREFIX ?= /usr/local
DEB_PACKAGES = build-essential cmake pkg-config libdnnl-dev libopenmpi-dev openmpi-bin \
	zlib1g-dev libcmocka-dev dataset-fashion-mnist iproute2 libhdf5-dev libcjson-dev \
	libcurl4-openssl-dev python3-h5py libzip-dev python3-dev python3-numpy python3-pytest \
	python3-setuptools python3-venv python3-wheel libsimgrid-dev qemu-user python3-pil python3-pydot \
	graphviz python3-matplotlib python3-pandas python3-sklearn python3-seaborn python3-regex
# Installed when the distribution has them, skipped with a line otherwise: clang-14 compiles the GPU
# kernels to PTX (TNT_GPU=AUTO builds without them when it is missing).
DEB_OPTIONAL_PACKAGES = clang-14
FUZZ_SECONDS ?= 60
FUZZ_TARGETS = json h5_weights h5_model npy idx hostfile slurm zip opgraph settings launcher_args

.PHONY: all deps build demo demo-python test test-isa test-mpich test-asan valgrind fuzz bench bench-quick bench-avx2 bench-deps bench-rnn \
	bench-lenet-bf16 bench-python bench-loops bench-conv3d bench-ops scale-study install clean test-gpu gpu-check gpu-pack bench-gpu

all: build

deps:
	@./scripts/install-deps.sh $(DEB_PACKAGES) --optional $(DEB_OPTIONAL_PACKAGES)

build:
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

# The Tarantella quick start: LeNet-5 on Fashion-MNIST, data-parallel on 2 ranks.
demo: deps build
	$(BUILD)/bin/tarantella -n 2 -- $(BUILD)/bin/lenet5 --number_epochs=5 --optimizer=adam --learning_rate=0.001

# The same quick start from Python (examples/python/quick_start.py, the tarantella package).
demo-python: deps build
	PYTHONPATH=$(BUILD)/python $(BUILD)/bin/tarantella -n 2 -- /usr/bin/python3 examples/python/quick_start.py \
		--number_epochs=5 --optimizer=adam --learning_rate=0.001

test: deps build
	cd $(BUILD) && ctest --output-on-failure -j 2

# The suite again with every kernel capped to AVX2 (oneDNN's, and the library's own, which follow
# oneDNN's ISA), so that an AVX-512 machine also proves the AVX2 paths a Zen 3 or Haswell runs; and
# on a CPU with AVX-512 the mixed-precision tests capped to avx512_core (AVX-512 without bf16).
test-isa: deps build
	cd $(BUILD) && ONEDNN_MAX_CPU_ISA=AVX2 ctest --output-on-failure -j 2
	@if grep -qw avx512f /proc/cpuinfo; then \
	  cd $(BUILD) && ONEDNN_MAX_CPU_ISA=AVX512_CORE ctest --output-on-failure -j 2 -R mixed_precision; \
	else echo "test-isa: no AVX-512 on this CPU: the avx512_core run is skipped (the AVX2 run covered it)"; fi

# The tests labelled mpi (the MPI test table and its _funneled entries, the lone-rank, launcher,
# fault, tnt-train and multi-host tests) against Debian's MPICH, beside the Open MPI build: MPICH is
# called by its own paths (mpicc.mpich, mpiexec.mpich); the system's mpicc/mpirun stay Open MPI's.
MPICH_PACKAGES = mpich libmpich-dev
test-mpich: deps
	@./scripts/install-deps.sh $(MPICH_PACKAGES)
	@cmake -S . -B build-mpich -DCMAKE_BUILD_TYPE=Release -DTNT_MPI=mpich -DTNT_SMPI_TEST=OFF $(CMAKE_FLAGS) >/dev/null
	@cmake --build build-mpich -j $(JOBS)
	cd build-mpich && ctest --output-on-failure -j 2 -L mpi

test-asan: deps
	@cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DTNT_SANITIZE=ON -DTNT_SMPI_TEST=OFF >/dev/null
	@cmake --build build-asan -j $(JOBS)
	cd build-asan && ASAN_OPTIONS=detect_leaks=1 ctest --output-on-failure -j 2

# memcheck over the parsers' and loaders' unit tests, tnt-train and tnt-predict (a few minutes);
# VALGRIND_MPI=--mpi adds LeNet-5 on 2 ranks for 2 steps (slow). scripts/valgrind_check.sh
valgrind: build
	bash scripts/valgrind_check.sh $(BUILD) $(VALGRIND_MPI)

# libFuzzer (clang) on each target for FUZZ_SECONDS, from the committed corpus; new inputs go to
# build-fuzz/corpus/<target>, crashes to build-fuzz/crash-<target>-* (add them to
# tests/fuzz/corpus/<target>/ once fixed: ctest replays that folder in every build). A finding ends its
# target only: the others still run, and the command fails at the end naming the targets with findings.
fuzz:
	@./scripts/install-deps.sh clang libclang-rt-14-dev $(DEB_PACKAGES)
	@CC=clang cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTNT_FUZZ=ON -DTNT_SMPI_TEST=OFF >/dev/null
	@cmake --build build-fuzz -j $(JOBS) --target fuzz_targets
	@failed=""; for t in $(FUZZ_TARGETS); do \
	  mkdir -p build-fuzz/corpus/$$t && echo "== fuzz_$$t ($(FUZZ_SECONDS) s)" && \
	  TNT_H5_TIME_LIMIT=5 ASAN_OPTIONS=detect_leaks=1 build-fuzz/tests/fuzz/fuzz_$$t -max_total_time=$(FUZZ_SECONDS) \
	    -timeout=30 -rss_limit_mb=4096 -max_len=65536 -print_final_stats=1 -artifact_prefix=build-fuzz/crash-$$t- \
	    build-fuzz/corpus/$$t tests/fuzz/corpus/$$t || failed="$$failed $$t"; \
	done; \
	if [ -n "$$failed" ]; then echo "fuzz: findings in:$$failed (build-fuzz/crash-<target>-*)"; exit 1; fi; \
	echo "fuzz: every target ran $(FUZZ_SECONDS) s clean"

# The peer needs OpenBLAS: without libopenblas0-pthread Debian's torch runs on the reference BLAS,
# 5-30x slower, and the benchmark refuses to print ratios against it.
bench-deps: deps
	@./scripts/install-deps.sh python3-torch python3-torchvision libopenblas0-pthread python3-matplotlib

# Under 15 minutes on 2 cores; bench-quick (LeNet-5 and the MLP, one run each) under 3.
bench: bench-deps build
	/usr/bin/python3 bench/run.py --build $(BUILD)

bench-quick: bench-deps build
	/usr/bin/python3 bench/run.py --build $(BUILD) --quick

# The tests that need an NVIDIA GPU (ctest label gpu); a line and nothing else without one (CI).
test-gpu: build
	@if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then \
		cd $(BUILD) && ctest -L gpu --output-on-failure; \
	else echo "test-gpu: no NVIDIA GPU here (nvidia-smi lists none): the GPU tests are skipped"; fi

# The GPU check in one script (scripts/gpu_check.sh: PTX on the driver, GPU tests, training GPU vs
# CPU, the benchmark; under 8 minutes; results in $$OUT or gpu-check-out/). gpu-pack prepares, on
# the build machine, what a GPU machine without the project's libraries needs (carry gpu-check-pack).
gpu-check:
	bash scripts/gpu_check.sh

gpu-pack: build
	bash scripts/gpu_check.sh --pack gpu-check-pack

# Training samples/s on the GPU against PyTorch on the same GPU (bench/peers/torch_gpu.py),
# alternating, best of 2: LeNet-5 at batch 512, the MLP, ResNet-50 at 64 and 128 (fp32, TF32,
# bf16), the Transformer; GPU memory per sample. The benchmark phase of gpu_check.sh alone.
bench-gpu:
	@if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then \
		BUDGET=$${BUDGET:-540} bash scripts/gpu_check.sh --bench-only; \
	else echo "bench-gpu: no NVIDIA GPU here (nvidia-smi lists none): nothing to measure"; fi

# The same on AVX2 kernels only, ours and the peer's (an AVX2 machine on an AVX-512 one).
bench-avx2: bench-deps build
	/usr/bin/python3 bench/run.py --build $(BUILD) --isa avx2

# As bench/run.py: no fresh pages per step for either side (page faults are dear on this VM), and
# OpenBLAS picks its own kernels for the peer.
BENCH_ENV = env -u OPENBLAS_CORETYPE MALLOC_MMAP_MAX_=0 MALLOC_TRIM_THRESHOLD_=68719476736

# The scale study (issue 25, bench/scale/README.md): a training step of ResNet-50, the Transformer
# and the MLP on 8-256 simulated CPU ranks and 4-96 simulated GPUs (SimGrid's SMPI, each layer
# charged its time measured here), flat against node-aware reduction; the table and
# BUILD/scale-study/scale_study.png. About an hour on 2 busy cores (a flat step of 256 ranks: minutes).
scale-study: build
	@./scripts/install-deps.sh python3-matplotlib
	/usr/bin/python3 bench/scale/scale_study.py --sim $(BUILD)/smpi/bin/scale_sim --out $(BUILD)/scale-study

# The recurrent text classifier (bench/bench_rnn.c) against PyTorch at 1 thread, LSTM and GRU
# alternating, three rounds (the machine is shared: take the best), then 2 ranks against 1.
bench-rnn: bench-deps build
	@for round in 1 2 3; do for cell in lstm gru; do \
		$(BENCH_ENV) OMP_NUM_THREADS=1 $(BUILD)/bin/bench_rnn --cell $$cell; \
		$(BENCH_ENV) /usr/bin/python3 bench/peers/torch_rnn.py --cell $$cell --threads 1; \
	done; done
	@for cell in lstm gru; do $(BENCH_ENV) $(BUILD)/bin/tarantella -n 2 -- $(BUILD)/bin/bench_rnn --cell $$cell; done

# LeNet-5 trained 5 epochs with Adam(1e-3), float32 and then Keras's mixed_bfloat16 policy: the
# test accuracies side by side (issue 12: within 0.3 points). Minutes: not a ctest entry.
bench-lenet-bf16: build
	@for policy in float32 mixed_bfloat16; do \
		$(BENCH_ENV) OMP_NUM_THREADS=2 $(BUILD)/bin/lenet5 --number_epochs=5 --optimizer=adam \
			--learning_rate=0.001 --verbose=0 --dtype_policy=$$policy; \
	done

# The quick start from Python against the C program on the same flags (samples/s, 1 and 2 ranks).
# Keras loops outside one long fit (train_on_batch, fit per batch, a GAN step), 1 and 2 ranks,
# against the same loops in PyTorch (bench/loops.py)
bench-loops: bench-deps build
	$(BENCH_ENV) /usr/bin/python3 bench/loops.py --build $(BUILD)

bench-python: deps build
	$(BENCH_ENV) /usr/bin/python3 bench/python_vs_c.py --build $(BUILD)

# Conv3D and ConvLSTM2D models (bench/bench_conv3d.c) against PyTorch at 1 thread, alternating,
# three rounds; then the same two models with data_format channels_first.
bench-conv3d: bench-deps build
	@for round in 1 2 3; do for model in conv3d convlstm; do \
		$(BENCH_ENV) OMP_NUM_THREADS=1 $(BUILD)/bin/bench_conv3d --model $$model; \
		$(BENCH_ENV) /usr/bin/python3 bench/peers/torch_conv3d.py --model $$model --threads 1; \
	done; done
	@for model in conv3d convlstm; do $(BENCH_ENV) OMP_NUM_THREADS=1 $(BUILD)/bin/bench_conv3d --model $$model --channels_first; done

# Issue 22: a Transformer encoder block written with keras.ops in a custom Layer against the same
# block from the library's layers and PyTorch eager, 1 thread, alternating, best of 3 (bench/run_ops.py).
bench-ops: bench-deps build
	$(BENCH_ENV) /usr/bin/python3 bench/run_ops.py --build $(BUILD)

install: build
	cmake --install $(BUILD) --prefix $(PREFIX)

clean:
	rm -rf $(BUILD) build-asan build-fuzz build-mpich
