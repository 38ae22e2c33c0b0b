/* dlsym, interposed: statically linked cudart (nvcc's default) and
 * libraries that dlopen libcudart or libcuda find their entry points with
 * dlsym(handle, name) and would bypass an LD_PRELOAD. For the exact names
 * cudalloc serves (symbols.h), dlsym answers with cudalloc's entry point
 * when the real lookup finds the symbol in the handle; every other lookup
 * is the real dlsym's, untouched.
 *
 * glibc's dlsym resolves RTLD_NEXT relative to its caller's return
 * address. A C wrapper calling the real dlsym would make every RTLD_NEXT
 * lookup in the process relative to libcudalloc (and send other interposers
 * into endless recursion), so on x86-64 the exported dlsym is a trampoline:
 * it asks a C function for a replacement and, when there is none, jumps to
 * the real dlsym with the caller's return address still on the stack.
 * Other architectures get a C version: its call to the real dlsym is in
 * tail position, which GCC and Clang compile to a jump at -O2 (sibling-call
 * optimization), keeping the caller's return address; nothing in C
 * guarantees it, hence the trampoline where one is written.
 *
 * Both symbol versions are exported (shim/exports.map): programs built
 * against glibc < 2.34 (and libcudart itself) reference dlsym@GLIBC_2.2.5,
 * newer ones dlsym@GLIBC_2.34.
 *
 * Nothing here allocates or takes a lock, and this file is built without
 * sanitizers (shim/shim.mk): the sanitizer runtimes call dlsym while they
 * start, before instrumented code can run.
 */
#define _GNU_SOURCE
#include "shim.h"

#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

__thread unsigned ca_guard_depth;

/* used by the trampoline's indirect jump */
__attribute__((visibility("hidden"))) void *(*ca_real_dlsym)(void *, const char *);

void ca_real_dlsym_init(void) {
  if (__atomic_load_n(&ca_real_dlsym, __ATOMIC_ACQUIRE)) return;
  void *f = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
  if (!f) f = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
  if (!f) {
    static const char msg[] = "cudalloc: cannot find the real dlsym\n";
    (void)!write(2, msg, sizeof msg - 1);
    abort();
  }
  __atomic_store_n(&ca_real_dlsym, (void *(*)(void *, const char *))f, __ATOMIC_RELEASE);
}

// ----------------------------------------------------------------------------
// Which names, which callers
// ----------------------------------------------------------------------------

int ca_sym_find(const char *name) {
  if (name[0] != 'c' || name[1] != 'u') return -1;   /* the common case: not CUDA */
  for (int s = 0; s < CA_SYM_COUNT; s++)
    if (strcmp(name, ca_sym_name((ca_sym_t)s)) == 0) return s;
  return -1;
}

/* The bounds of libcudalloc itself, from the linker. */
extern const char __ehdr_start[] __attribute__((visibility("hidden")));
extern const char _end[] __attribute__((visibility("hidden")));

/* Lookups made by cudalloc itself (the CUDA backend opening libcuda) must
 * get the real functions, or the backend would call back into the shim. */
static bool from_self(const void *caller) {
  return (const char *)caller >= __ehdr_start && (const char *)caller < _end;
}

static __thread bool in_hook;

/* The replacement for dlsym(handle, name) called from caller, or NULL to
 * let the real dlsym answer. It answers inside cudalloc entry points too:
 * the runtime may start there (cudaFree(0) passed through) and must still
 * get cudalloc's cuGetProcAddress. */
__attribute__((visibility("hidden"))) void *ca_dlsym_hook(void *handle, const char *name,
                                                          const void *caller) {
  ca_real_dlsym_init();
  if (handle == RTLD_NEXT || handle == RTLD_DEFAULT || !name) return NULL;
  if (in_hook || from_self(caller)) return NULL;
  int sym = ca_sym_find(name);
  if (sym < 0 || (ca_sym_sim_only_driver((ca_sym_t)sym) && !ca_shim_sim())) return NULL;
  in_hook = true;
  void *real = ca_real_dlsym(handle, name);
  void *mine = ca_sym_wrapper((ca_sym_t)sym);
  if (real && real != mine) ca_real_learn((ca_sym_t)sym, handle, real);
  in_hook = false;
  return real && real != mine ? mine : NULL;
}

// ----------------------------------------------------------------------------
// The exported dlsym
// ----------------------------------------------------------------------------

#if defined(__x86_64__) && !defined(CA_DLSYM_NO_TRAMPOLINE)

#if defined(__CET__)
#define CA_ENDBR "endbr64\n"
#else
#define CA_ENDBR ""
#endif

/* At entry the return address is at 0(%rsp); after two pushes and the
 * 8-byte pad that realigns the stack for the call, it is at 24(%rsp). */
__asm__(".text\n"
        ".globl ca_dlsym_v2_34\n"
        ".globl ca_dlsym_v2_2_5\n"
        ".type ca_dlsym_v2_34, @function\n"
        ".type ca_dlsym_v2_2_5, @function\n"
        ".symver ca_dlsym_v2_34, dlsym@@GLIBC_2.34\n"
        ".symver ca_dlsym_v2_2_5, dlsym@GLIBC_2.2.5\n"
        ".p2align 4\n"
        "ca_dlsym_v2_34:\n"
        "ca_dlsym_v2_2_5:\n"
        CA_ENDBR
        "  push %rdi\n"
        "  push %rsi\n"
        "  sub $8, %rsp\n"
        "  mov 24(%rsp), %rdx\n"
        "  call ca_dlsym_hook\n"
        "  add $8, %rsp\n"
        "  pop %rsi\n"
        "  pop %rdi\n"
        "  test %rax, %rax\n"
        "  jz 1f\n"
        "  ret\n"
        "1:\n"
        "  jmp *ca_real_dlsym(%rip)\n"
        ".size ca_dlsym_v2_34, .-ca_dlsym_v2_34\n"
        ".size ca_dlsym_v2_2_5, .-ca_dlsym_v2_2_5\n");

#else

/* No trampoline: correct only while the last call is compiled as a jump. */
__attribute__((visibility("default"))) void *ca_dlsym_c(void *handle, const char *name) {
  void *mine = ca_dlsym_hook(handle, name, __builtin_return_address(0));
  return mine ? mine : ca_real_dlsym(handle, name);
}
__asm__(".symver ca_dlsym_c, dlsym@@GLIBC_2.34");
__attribute__((visibility("default"), alias("ca_dlsym_c"))) void *ca_dlsym_c_old(void *, const char *);
__asm__(".symver ca_dlsym_c_old, dlsym@GLIBC_2.2.5");

#endif
