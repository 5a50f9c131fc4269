/* Speaks bsdkm-instr's protocol (kmod/workload/instr_driver.c) with trivial work, to test the
 * counting around it: an item named AVX512-... executes an AVX-512 instruction (EVEX encoded),
 * which Valgrind cannot decode, whatever the CPU. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

__attribute__((noinline)) int bsdkm_measure(int kind, long n)
{
    volatile long x = 0;
    long i;
    if (kind == 2)
        __asm__ volatile("vpxord %%zmm1, %%zmm1, %%zmm1" ::: "xmm1");
    for (i = 0; i < n; i++)
        x += i;
    return 0;
}

int main(int argc, char **argv)
{
    int i;
    printf("bsdkm-instr begin 1\n");
    for (i = 1; i < argc; i++) {
        char name[128];
        char *eq;
        long n;
        snprintf(name, sizeof(name), "%s", argv[i]);
        eq = strrchr(name, '=');
        if (eq == NULL)
            continue;
        *eq = '\0';
        n = atol(eq + 1);
        if (strncmp(name, "NONE", 4) == 0) {
            printf("bsdkm-instr skip %d %s reason=not-in-this-build\n", i, name);
            continue;
        }
        fflush(stdout);
        bsdkm_measure(strncmp(name, "AVX512", 6) == 0 ? 2 : 1, n);
        printf("bsdkm-instr item %d %s kind=sym amount=%ld block=%ld calls=1 rc=0\n", i, name, n, n);
        fflush(stdout);
    }
    printf("bsdkm-instr end\n");
    return 0;
}
