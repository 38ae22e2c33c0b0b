/* Program addresses named from their debug information, with elfutils'
 * libdw: the function, file:line, and the chain of inlined functions (the
 * way eu-addr2line -i walks the DWARF scopes).
 *
 * libdw is loaded with dlopen when the first report is written, not
 * linked: a preloaded allocator must not pull libdw, libelf and their
 * compression libraries into every program it is preloaded into, nor fail
 * to load where elfutils is not installed (a GPU node, a slim container).
 * Only its header is needed at build time (libdw-dev), for the types.
 * Without libdw, or for a module without debug information, the name comes
 * from the symbol table (dladdr) with module+offset, and says so. */
#define _GNU_SOURCE /* dladdr */
#include "symbolize.h"

#include <dlfcn.h>
#include <dwarf.h>
#include <elfutils/libdwfl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <unistd.h>

/* libdw's functions, looked up in the library dlopen returned. */
#define CA_DW_FUNCS(X)                                                                                   \
  X(dwfl_begin) X(dwfl_end) X(dwfl_report_begin) X(dwfl_report_end) X(dwfl_linux_proc_report)           \
  X(dwfl_linux_proc_find_elf) X(dwfl_standard_find_debuginfo) X(dwfl_addrmodule) X(dwfl_module_addrinfo) \
  X(dwfl_module_getsrc) X(dwfl_lineinfo) X(dwfl_module_addrdie) X(dwfl_module_getdwarf) X(dwarf_getscopes) \
  X(dwarf_getscopes_die) X(dwarf_offdie) X(dwarf_dieoffset) X(dwarf_diecu) X(dwarf_tag) X(dwarf_attr)      \
  X(dwarf_attr_integrate) X(dwarf_formstring) X(dwarf_formudata) X(dwarf_diename) X(dwarf_getsrcfiles)     \
  X(dwarf_filesrc)

#define CA_DW_PTR(name) static __typeof__(name) *p_##name;
CA_DW_FUNCS(CA_DW_PTR)
#undef CA_DW_PTR

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int loaded;            /* 0: not tried; 1: libdw ready; -1: not available */
static void *libdw;
static Dwfl *dwfl;
static Dwfl_Callbacks callbacks;

static bool load_libdw(void) {
  if (loaded) return loaded > 0;
  loaded = -1;
  /* A statically linked program has no dynamic loader (AT_BASE 0): dlopen
   * would bring a second libc beside the program's, and libdw crashes in
   * it (tests/install/check.sh's static build did, at the exit summary). */
  if (getauxval(AT_BASE) == 0) return false;
  if (!(libdw = dlopen("libdw.so.1", RTLD_NOW | RTLD_LOCAL))) return false;
#define CA_DW_LOAD(name) \
  if (!(*(void **)&p_##name = dlsym(libdw, #name))) return false;
  CA_DW_FUNCS(CA_DW_LOAD)
#undef CA_DW_LOAD
  callbacks.find_elf = p_dwfl_linux_proc_find_elf;
  callbacks.find_debuginfo = p_dwfl_standard_find_debuginfo;
  loaded = 1;
  return true;
}

/* The process's modules, as they are now (a library loaded since the last
 * report is found by reporting again). */
static bool report_modules(void) {
  if (!dwfl && !(dwfl = p_dwfl_begin(&callbacks))) return false;
  p_dwfl_report_begin(dwfl);
  int rc = p_dwfl_linux_proc_report(dwfl, getpid());
  p_dwfl_report_end(dwfl, NULL, NULL);
  return rc == 0;
}

static Dwfl_Module *module_of(Dwarf_Addr addr) {
  if (!load_libdw() || (!dwfl && !report_modules())) return NULL;
  Dwfl_Module *mod = p_dwfl_addrmodule(dwfl, addr);
  if (!mod && report_modules()) mod = p_dwfl_addrmodule(dwfl, addr);
  return mod;
}

static void copy(char *dst, size_t cap, const char *src) { snprintf(dst, cap, "%s", src ? src : ""); }

static const char *die_name(Dwarf_Die *die) {
  Dwarf_Attribute attr;
  const char *name = p_dwarf_formstring(p_dwarf_attr_integrate(die, DW_AT_name, &attr));
  return name ? name : p_dwarf_diename(die);
}

/* The functions inlined at addr, innermost first, after out[0] (which has
 * the innermost function's own line): each one's caller with the line of
 * the call, from DW_AT_call_file/line. Returns the entries filled. */
static int inline_chain(Dwfl_Module *mod, Dwarf_Addr addr, ca_sym_t *out, int max) {
  Dwarf_Addr bias = 0;
  Dwarf_Die *cudie = p_dwfl_module_addrdie(mod, addr, &bias);
  Dwarf_Die *scopes = NULL;
  if (!cudie) return 1;
  int n = p_dwarf_getscopes(cudie, addr - bias, &scopes);
  if (n <= 0) return free(scopes), 1;
  /* The innermost scope's concrete nesting (not its abstract origin's). */
  Dwarf_Die inner;
  Dwarf_Off off = p_dwarf_dieoffset(&scopes[0]);
  free(scopes);
  scopes = NULL;
  if (!p_dwarf_offdie(p_dwfl_module_getdwarf(mod, &bias), off, &inner)) return 1;
  n = p_dwarf_getscopes_die(&inner, &scopes);
  Dwarf_Files *files = NULL;
  int filled = 1;
  bool named = false;   /* out[0].func holds the innermost function's name */
  if (n > 0 && p_dwarf_getsrcfiles(cudie, &files, NULL) == 0) {
    for (int i = 0; i < n && filled <= max; i++) {
      int tag = p_dwarf_tag(&scopes[i]);
      if (tag != DW_TAG_inlined_subroutine && tag != DW_TAG_subprogram) continue;
      if (!named) {
        copy(out[0].func, sizeof out[0].func, die_name(&scopes[i]));
        named = true;
      }
      if (tag != DW_TAG_inlined_subroutine || filled == max) break;
      /* scopes[i] was inlined into the next function scope, at its call line */
      out[filled - 1].inlined = true;
      ca_sym_t *caller = &out[filled++];
      memset(caller, 0, sizeof *caller);
      Dwarf_Attribute attr;
      Dwarf_Word val;
      if (p_dwarf_formudata(p_dwarf_attr(&scopes[i], DW_AT_call_file, &attr), &val) == 0)
        copy(caller->file, sizeof caller->file, p_dwarf_filesrc(files, val, NULL, NULL));
      if (p_dwarf_formudata(p_dwarf_attr(&scopes[i], DW_AT_call_line, &attr), &val) == 0) caller->line = (int)val;
      for (int j = i + 1; j < n; j++) {
        int t = p_dwarf_tag(&scopes[j]);
        if (t == DW_TAG_inlined_subroutine || t == DW_TAG_subprogram) {
          copy(caller->func, sizeof caller->func, die_name(&scopes[j]));
          break;
        }
      }
    }
  }
  free(scopes);
  return filled;
}

static int from_dwarf(Dwarf_Addr addr, ca_sym_t *out, int max, ca_sym_where_t *where) {
  Dwfl_Module *mod = module_of(addr);
  if (!mod) return 0;
  GElf_Off off = 0;
  GElf_Sym sym;
  copy(out[0].func, sizeof out[0].func, p_dwfl_module_addrinfo(mod, addr, &off, &sym, NULL, NULL, NULL));
  out[0].func_off = (uintptr_t)off;
  Dwfl_Line *line = p_dwfl_module_getsrc(mod, addr);
  int lineno = 0;
  const char *file = line ? p_dwfl_lineinfo(line, NULL, &lineno, NULL, NULL, NULL) : NULL;
  if (!file) return out[0].func[0] ? 1 : 0;   /* the symbol table's name, no lines */
  copy(out[0].file, sizeof out[0].file, file);
  out[0].line = lineno;
  where->debug_info = true;
  return inline_chain(mod, addr, out, max);
}

int ca_symbolize(void *pc, bool ret, ca_sym_t *out, int max, ca_sym_where_t *where) {
  memset(where, 0, sizeof *where);
  if (max <= 0) return 0;
  memset(out, 0, sizeof *out);
  Dl_info info;
  if (pc && dladdr(pc, &info) && info.dli_fname) {
    const char *lib = strrchr(info.dli_fname, '/');
    copy(where->module, sizeof where->module, lib ? lib + 1 : info.dli_fname);
    where->offset = (uintptr_t)pc - (uintptr_t)info.dli_fbase;
  }
  /* A return address's call is the instruction before it. */
  Dwarf_Addr addr = (Dwarf_Addr)(uintptr_t)pc - (ret && pc ? 1 : 0);
  pthread_mutex_lock(&lock);
  int n = pc ? from_dwarf(addr, out, max, where) : 0;
  if (n) out[0].func_off += (uintptr_t)pc - (uintptr_t)addr;
  where->libdw = loaded > 0;
  pthread_mutex_unlock(&lock);
  if (n == 0) {   /* no module libdw knows: the dynamic symbol table's name, if any */
    if (pc && dladdr(pc, &info) && info.dli_sname) {
      copy(out[0].func, sizeof out[0].func, info.dli_sname);
      out[0].func_off = (uintptr_t)pc - (uintptr_t)info.dli_saddr;
    }
    n = 1;
  }
  return n;
}

void ca_symbolize_forget(void) {
  pthread_mutex_lock(&lock);
  if (dwfl) p_dwfl_end(dwfl);
  dwfl = NULL;
  pthread_mutex_unlock(&lock);
}
