/*
 * bsdkm-modload: load or unload one Linux kernel module, exactly once.
 *
 *   bsdkm-modload load   MODULE.ko [PARAMS]
 *   bsdkm-modload unload NAME
 *
 * Why not busybox insmod: when finit_module fails it retries with
 * init_module, so a failing module init runs twice and only the second
 * result reaches the exit status. This loader makes one finit_module call
 * and reports exactly what the kernel said.
 *
 * Output (one line on stdout, always, so the console log shows the outcome
 * even when the caller's own marker never appears):
 *   bsdkm-modload: load /libwolfssl.ko: ok
 *   bsdkm-modload: load /libwolfssl.ko: failed errno=125 (Operation canceled)
 *   bsdkm-modload: unload libwolfssl: failed errno=16 (Device or resource busy)
 * Exit status: 0 on success, 1 when the kernel refused, 2 on usage errors.
 *
 * Built with `gcc -static -Os` so it runs from a bare initramfs.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define PROG "bsdkm-modload"

static int report(const char *verb, const char *what, int err)
{
    if (err == 0) {
        printf(PROG ": %s %s: ok\n", verb, what);
        fflush(stdout);
        return 0;
    }
    printf(PROG ": %s %s: failed errno=%d (%s)\n", verb, what, err, strerror(err));
    fflush(stdout);
    return 1;
}

static int load(const char *path, const char *params)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return report("load", path, errno);
    /* Announce before the call: a module init that never returns leaves
     * this line as the last word from userspace. */
    printf(PROG ": load %s: calling finit_module\n", path);
    fflush(stdout);
    long rc = syscall(SYS_finit_module, fd, params, 0);
    int err = rc == 0 ? 0 : errno;
    close(fd);
    return report("load", path, err);
}

static int unload(const char *name)
{
    /* O_NONBLOCK: fail with EBUSY/EWOULDBLOCK instead of waiting forever
     * for the module's users to go away. */
    long rc = syscall(SYS_delete_module, name, O_NONBLOCK);
    return report("unload", name, rc == 0 ? 0 : errno);
}

static int usage(void)
{
    fprintf(stderr, "usage: " PROG " load MODULE.ko [PARAMS] | " PROG " unload NAME\n");
    return 2;
}

int main(int argc, char **argv)
{
    if (argc >= 3 && argc <= 4 && strcmp(argv[1], "load") == 0)
        return load(argv[2], argc == 4 ? argv[3] : "");
    if (argc == 3 && strcmp(argv[1], "unload") == 0)
        return unload(argv[2]);
    return usage();
}
