/* "env.c": environment variables, readable before libc has started. */
#ifndef CUDALLOC_ENV_H
#define CUDALLOC_ENV_H

/* The value of an environment variable, read from environ directly so that
 * it works before libc has finished starting (under preload). */
const char *ca_getenv(const char *name);

#endif /* CUDALLOC_ENV_H */
