# Extra targets of the interception layer (the library itself is built by the
# top-level Makefile from shim/*.c and alloc/*.c).
