"""For this folder's own peers (torch_lenet5.py and torch_models.py stay copies of the shared peer
scripts, /work/shared/bench/, and pin their own). Imported before torch, it pins every thread pool
to the command line's --threads (default 1): Debian's torch calls the system BLAS (OpenBLAS when
libopenblas0-pthread is installed), whose own pool ignores torch.set_num_threads. blas_backend()
says which BLAS torch's matrix products reach: 'openblas' or 'reference' (the slow netlib one)."""
import os
import sys

THREADS = next((sys.argv[i + 1] for i, a in enumerate(sys.argv[:-1]) if a == "--threads"), "1")
for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_v] = THREADS


def blas_backend():
    try:
        with open("/proc/self/maps") as f:
            maps = f.read()
    except OSError:
        return "unknown"
    return "openblas" if "openblas" in maps else ("reference" if "/blas/libblas.so" in maps else "unknown")
