"""The extension module and the runtime: tnt.init, the rank API, finalization at exit.

libmpi is made global before the extension loads: some Open MPI builds load plugins that look up
MPI's own symbols, which fails when libmpi came in privately (RTLD_LOCAL) as a dependency of a
Python extension (the same reason mpi4py loads it with RTLD_GLOBAL).
"""
import atexit
import ctypes
import gc


def _preload_mpi():
    for name in ("libmpi.so.40", "libmpi.so"):
        try:
            ctypes.CDLL(name, mode=ctypes.RTLD_GLOBAL)
            return
        except OSError:
            pass


_preload_mpi()

from tarantella import _tarantella as C  # noqa: E402  (after the preload)

_state = {"initialized": False}


def init():
    """Starts the runtime (tnt_init): reads the TNT_* settings and, under the `tarantella`
    launcher, starts MPI. Call it first; calling it again does nothing. Every other call of the
    package calls it when it has not been called yet."""
    if _state["initialized"]:
        return
    C.init()
    _state["initialized"] = True
    atexit.register(_finalize)


def ensure_init():
    if not _state["initialized"]:
        init()


def _finalize():
    gc.collect()  # models, datasets and callbacks that are garbage go before MPI does
    C.finalize()
    _state["initialized"] = False


def get_rank():
    """This process's rank, 0 .. get_size() - 1."""
    ensure_init()
    return C.get_rank()


def gpu_status():
    """The device this rank computes on, as TNT_DEVICE chose it, in one line: "gpu 0: NVIDIA H100
    80GB HBM3 (0000:1b:00.0)", "cpu: TNT_DEVICE=cpu", "cpu: no libcuda.so.1"."""
    ensure_init()
    return C.gpu_status()


def gpu_device_count():
    """The GPUs this process can use (0 without a driver, a device or GPU kernels)."""
    return C.gpu_device_count()


def get_size():
    """The number of ranks (processes) training together."""
    ensure_init()
    return C.get_size()


def get_master_rank():
    ensure_init()
    return C.get_master_rank()


def is_master_rank():
    ensure_init()
    return C.is_master_rank()
