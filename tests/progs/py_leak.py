"""Python frames in the leak report (track:python), without PyTorch: this
script calls cudaMalloc of the preloaded libcudalloc.so through
ctypes.PyDLL, which keeps the GIL during the call, from two functions, and
leaks both blocks. It prints the lines of the two calls, so that the test
does not hard-code them.
    LD_PRELOAD=.../libcudalloc.so CUDALLOC_CONF=backend:sim,track:python \
        python3 py_leak.py .../libcudalloc.so
"""
import ctypes
import sys

lib = ctypes.PyDLL(sys.argv[1])   # the preloaded library: the same handle
lib.cudaMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
lib.cudaMalloc.restype = ctypes.c_int
kept = []


def load_weights():
    p = ctypes.c_void_p()
    rc, line = lib.cudaMalloc(ctypes.byref(p), 3000), sys._getframe().f_lineno
    assert rc == 0, rc
    kept.append(p)
    return line


def make_activations():
    p = ctypes.c_void_p()
    rc, line = lib.cudaMalloc(ctypes.byref(p), 5000), sys._getframe().f_lineno
    assert rc == 0, rc
    kept.append(p)
    return line


print("py_leak: lines %d %d" % (load_weights(), make_activations()))
print("py_leak: ok")
