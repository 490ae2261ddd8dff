/* A hint to the core that this thread is spinning on a flag (x86's pause,
 * which also leaves more of a shared core to its other thread): for the
 * waits that poll before they sleep. */
#ifndef BG_SPIN_PAUSE_H
#define BG_SPIN_PAUSE_H

static inline void bg_spin_pause(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

#endif /* BG_SPIN_PAUSE_H */
