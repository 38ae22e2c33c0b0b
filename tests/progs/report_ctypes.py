# A Python program that asks the preloaded cudalloc for its reports through
# ctypes (docs/reports.md shows it): no module of cudalloc's, no build step.
#   LD_PRELOAD=libcudalloc.so CUDALLOC_CONF=report_signal:SIGUSR2,report:<prefix> python3 report_ctypes.py
# The allocations stand for what a framework makes through the CUDA runtime.
import ctypes
import os
import signal
import sys

lib = ctypes.CDLL(None)   # the process's symbols: the preloaded libcudalloc.so's among them
lib.cudalloc_print_stats.argtypes = [ctypes.c_void_p]
lib.cudalloc_report.argtypes = [ctypes.c_void_p]
lib.cudaMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
lib.cudaFree.argtypes = [ctypes.c_void_p]

p, q = ctypes.c_void_p(), ctypes.c_void_p()
assert lib.cudaMalloc(ctypes.byref(p), 3 << 20) == 0
lib.cudalloc_print_stats(None)   # the table, now, on stderr (None: stderr)
lib.cudalloc_report(None)        # the report files, now (None: the `report` paths)
sys.stderr.write("report_ctypes: reported\n")
sys.stderr.flush()
os.kill(os.getpid(), signal.SIGUSR2)   # what `kill -USR2 <pid>` does from another shell
sys.stderr.write("report_ctypes: signalled\n")
sys.stderr.flush()
assert lib.cudaMalloc(ctypes.byref(q), 1 << 20) == 0   # the next allocator call writes the reports
assert lib.cudaFree(q) == 0 and lib.cudaFree(p) == 0
print("report_ctypes: ok")
