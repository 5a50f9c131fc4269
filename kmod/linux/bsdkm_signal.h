/*
 * The guest side of the bsdkm-count QEMU plugin (kmod/qemu/bsdkm_count.c): start and stop
 * signals that carry this boot's nonce.
 *
 * A signal is a stub of code written into a fresh page and called: a marker `nopl` whose
 * displacement reads "BKC" plus the kind ('S' start, 'E' stop), then four `movabs $imm64, %r11`
 * (the nonce's two halves, the counted range's base, the item's index) and `ret`. The plugin
 * reads the immediates when it translates the stub, so nothing but these bytes crosses over.
 */
#ifndef BSDKM_SIGNAL_H
#define BSDKM_SIGNAL_H

#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

/* The nonce as the plugin reads it: 32 hex digits, the first 16 the high half. 0 or -1. */
static int bsdkm_parse_nonce(const char *hex, uint64_t half[2])
{
    if (!hex || strlen(hex) != 32)
        return -1;
    half[0] = half[1] = 0;
    for (int i = 0; i < 32; i++) {
        char c = hex[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (d < 0)
            return -1;
        half[i / 16] = (half[i / 16] << 4) | (uint64_t)d;
    }
    return 0;
}

static void bsdkm_put_movabs(unsigned char *p, uint64_t v)
{
    p[0] = 0x49; /* REX.W+B */
    p[1] = 0xbb; /* mov imm64 -> r11 */
    memcpy(p + 2, &v, 8);
}

/* Execute one signal; 0, or -1 when no executable page could be had. */
static int bsdkm_signal(char kind, const uint64_t nonce[2], uint64_t base, uint64_t index)
{
    unsigned char *page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    const unsigned char marker[7] = {0x0f, 0x1f, 0x80, 'B', 'K', 'C', (unsigned char)kind};
    uint64_t imm[4] = {nonce[0], nonce[1], base, index};
    if (page == MAP_FAILED)
        return -1;
    memcpy(page, marker, sizeof marker);
    for (int i = 0; i < 4; i++)
        bsdkm_put_movabs(page + 7 + 10 * i, imm[i]);
    page[47] = 0xc3; /* ret */
    if (mprotect(page, 4096, PROT_READ | PROT_EXEC) != 0) {
        munmap(page, 4096);
        return -1;
    }
    ((void (*)(void))(void *)page)(); /* r11 is caller-saved: the compiler expects it clobbered */
    munmap(page, 4096);
    return 0;
}

#endif
