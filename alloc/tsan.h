/* Whether this build runs under ThreadSanitizer, for the code that must
 * show it what it cannot see (annotations, an asm it cannot look into):
 * GCC says so with __SANITIZE_THREAD__, clang only through __has_feature. */
#ifndef CUDALLOC_TSAN_H
#define CUDALLOC_TSAN_H

#if defined(__SANITIZE_THREAD__)
#define CA_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define CA_TSAN 1
#endif
#endif

#endif /* CUDALLOC_TSAN_H */
