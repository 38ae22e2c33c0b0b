/* libscope_outer.so: loaded RTLD_LOCAL, it links libscope_caller_cudart.so,
 * which links libcudart, as a Python extension (torch/_C.so) links the
 * library (libtorch_cuda.so) that calls the runtime: the calls come from a
 * dependency, not from the object the program opened. */
#define API __attribute__((visibility("default")))

void scope_probe(int out[4]);

API void scope_outer_probe(int out[4]) { scope_probe(out); }
