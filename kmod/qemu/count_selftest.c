/*
 * /init of a minimal guest that proves the bsdkm-count plugin works with the QEMU at hand:
 * it counts a function of its own (work) instead of a module's .text.
 *
 * Environment (from the kernel command line): BSDKM_NONCE (32 hex digits), BSDKM_MODE:
 *   ok        item 0: work(1000), item 1: work(2000), item 2: work(1000)
 *   badnonce  item 0 counted, then a start carrying another nonce (the run must be void)
 *   order     a stop without a start (the run must be void)
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
    }
    printf("count-selftest: done mode=%s\n", mode ? mode : "ok");
    fflush(stdout);
    sync();
    reboot(RB_POWER_OFF);
    return 0;
}
