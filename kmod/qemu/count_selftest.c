/*
 * /init of a minimal guest that proves the bsdkm-count plugin works with the QEMU at hand:
 * it counts a function of its own (work) instead of a module's .text.
 *
 * Environment (from the kernel command line): BSDKM_NONCE (32 hex digits), BSDKM_MODE:
 *   ok        item 0: work(1000), item 1: work(2000), item 2: work(1000)
 *   badnonce  item 0 counted, then a start carrying another nonce (the run must be void)
 *   order     a stop without a start (the run must be void)
 *   dodge     item 0: work(1000) and hidden(1000), hidden() placed in a section of its own
 *             (bsdkm_dodge), as a module could place code outside .text; the section is not declared
 *   declared  the same, with the section declared to the plugin (an 'R' signal: range 1, its base
 *             and size) before the start
 * Then it powers the VM off. Built static: `gcc -static -O1 -no-pie`.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/reboot.h>
#include <unistd.h>

#include "../linux/bsdkm_signal.h"

volatile unsigned long sink;

__attribute__((noinline)) void work(unsigned long n)
{
    unsigned long acc = 0;
    for (unsigned long i = 0; i < n; i++)
        acc = acc * 31 + i;
    sink = acc;
}

/* Work outside .text: the linker keeps a section named like a C identifier apart and marks its
 * bounds with __start_/__stop_ symbols. */
__attribute__((noinline, section("bsdkm_dodge"))) void hidden(unsigned long n)
{
    unsigned long acc = 0;
    for (unsigned long i = 0; i < n; i++)
        acc = acc * 37 + i;
    sink = acc;
}

extern const char __start_bsdkm_dodge[], __stop_bsdkm_dodge[];

static void dodging_item(const uint64_t nonce[2], int declare)
{
    if (declare) {
        uint64_t size = (uint64_t)(__stop_bsdkm_dodge - __start_bsdkm_dodge);
        bsdkm_signal('R', nonce, (uint64_t)(uintptr_t)__start_bsdkm_dodge, (1ULL << 48) | size);
    }
    bsdkm_signal('S', nonce, (uint64_t)(uintptr_t)&work, 0);
    work(1000);
    hidden(1000);
    bsdkm_signal('E', nonce, (uint64_t)(uintptr_t)&work, 0);
}

static void item(const uint64_t nonce[2], uint64_t index, unsigned long n)
{
    bsdkm_signal('S', nonce, (uint64_t)(uintptr_t)&work, index);
    work(n);
    bsdkm_signal('E', nonce, (uint64_t)(uintptr_t)&work, index);
}

int main(void)
{
    const char *mode = getenv("BSDKM_MODE");
    uint64_t nonce[2], other[2];
    if (bsdkm_parse_nonce(getenv("BSDKM_NONCE"), nonce) != 0) {
        printf("count-selftest: no nonce\n");
    } else if (!mode || strcmp(mode, "ok") == 0) {
        item(nonce, 0, 1000);
        item(nonce, 1, 2000);
        item(nonce, 2, 1000);
    } else if (strcmp(mode, "badnonce") == 0) {
        item(nonce, 0, 1000);
        other[0] = nonce[0];
        other[1] = nonce[1] ^ 1;
        item(other, 1, 1000);
    } else if (strcmp(mode, "order") == 0) {
        bsdkm_signal('E', nonce, (uint64_t)(uintptr_t)&work, 0);
    } else if (strcmp(mode, "dodge") == 0 || strcmp(mode, "declared") == 0) {
        dodging_item(nonce, strcmp(mode, "declared") == 0);
    }
    printf("count-selftest: done mode=%s\n", mode ? mode : "ok");
    fflush(stdout);
    sync();
    reboot(RB_POWER_OFF);
    return 0;
}
