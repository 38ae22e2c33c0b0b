/* A program with the CUDA runtime linked in statically (nvcc's default,
 * -cudart static) makes its runtime calls inside itself: they never reach
 * the preloaded cudalloc, and on the simulated device, with no driver for
 * that runtime to load, its first call fails with "CUDA driver version is
 * insufficient". Nothing else would tell the user why, so at load the
 * program's file is read for the signs of a static runtime: runtime entry
 * points defined in its symbol table, or, when it is stripped, nvcc's
 * device-code section (.nvFatBinSegment) without a shared libcudart loaded.
 * Only the program itself is read; libraries opened later are not.
 */
#define _GNU_SOURCE
#include "sim_runtime.h"
#include "log.h"

#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct elf_view_s {
  const unsigned char *p;
  size_t n;
} elf_view_t;

/* The section headers, or NULL when the file is not a 64-bit ELF file whose
 * table lies inside it. */
static const Elf64_Shdr *sections(elf_view_t f, unsigned *count) {
  const Elf64_Ehdr *eh = (const Elf64_Ehdr *)f.p;
  if (f.n < sizeof *eh || memcmp(eh->e_ident, ELFMAG, SELFMAG) || eh->e_ident[EI_CLASS] != ELFCLASS64 ||
      eh->e_shentsize != sizeof(Elf64_Shdr) || eh->e_shoff > f.n ||
      (size_t)eh->e_shnum * sizeof(Elf64_Shdr) > f.n - eh->e_shoff || eh->e_shstrndx >= eh->e_shnum)
    return NULL;
  *count = eh->e_shnum;
  return (const Elf64_Shdr *)(f.p + eh->e_shoff);
}

static bool inside(elf_view_t f, const Elf64_Shdr *s) {
  return s->sh_type == SHT_NOBITS || (s->sh_offset <= f.n && s->sh_size <= f.n - s->sh_offset);
}

/* The NUL-terminated string at off of string section s, or "". */
static const char *string_at(elf_view_t f, const Elf64_Shdr *s, size_t off) {
  if (!inside(f, s) || off >= s->sh_size) return "";
  const char *str = (const char *)f.p + s->sh_offset + off;
  return memchr(str, 0, s->sh_size - off) ? str : "";
}

static bool defines_runtime(elf_view_t f, const Elf64_Shdr *sh, unsigned n, const Elf64_Shdr *symtab) {
  static const char *const names[] = {"cudaMalloc", "cudaGetDeviceCount", "__cudaRegisterFatBinary"};
  if (!inside(f, symtab) || symtab->sh_link >= n) return false;
  const Elf64_Sym *sym = (const Elf64_Sym *)(f.p + symtab->sh_offset);
  for (size_t i = 0; i < symtab->sh_size / sizeof *sym; i++) {
    if (sym[i].st_shndx == SHN_UNDEF) continue;
    const char *name = string_at(f, &sh[symtab->sh_link], sym[i].st_name);
    for (size_t k = 0; k < sizeof names / sizeof *names; k++)
      if (strcmp(name, names[k]) == 0) return true;
  }
  return false;
}

static int shared_runtime_seen(struct dl_phdr_info *info, size_t size, void *arg) {
  (void)size;
  (void)arg;
  return info->dlpi_name && strstr(info->dlpi_name, "libcudart") != NULL;
}

static bool static_runtime(elf_view_t f) {
  unsigned n = 0;
  const Elf64_Shdr *sh = sections(f, &n);
  if (!sh) return false;
  bool device_code = false;
  for (unsigned i = 0; i < n; i++) {
    if (sh[i].sh_type == SHT_SYMTAB && defines_runtime(f, sh, n, &sh[i])) return true;
    if (strcmp(string_at(f, &sh[((const Elf64_Ehdr *)f.p)->e_shstrndx], sh[i].sh_name), ".nvFatBinSegment") == 0)
      device_code = true;
  }
  return device_code && !dl_iterate_phdr(shared_runtime_seen, NULL);
}

void ca_sim_rt_check_static_runtime(void) {
  int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
  struct stat st;
  if (fd < 0) return;
  void *m = fstat(fd, &st) == 0 && st.st_size > 0
                ? mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0)
                : MAP_FAILED;
  close(fd);
  if (m == MAP_FAILED) return;
  if (static_runtime((elf_view_t){m, (size_t)st.st_size}))
    ca_log("this program links the CUDA runtime statically (nvcc's default): its runtime calls cannot "
           "reach cudalloc's simulated device and fail with \"CUDA driver version is insufficient\"; "
           "rebuild it with nvcc -cudart shared (or link -lcudart)");
  munmap(m, (size_t)st.st_size);
}
