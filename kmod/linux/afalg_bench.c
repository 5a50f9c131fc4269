/*
 * bsdkm-afalg: throughput of AES-GCM, AES-CBC, SHA-256 and HMAC-SHA256 through
 * the Linux kernel's AF_ALG interface, bound to a chosen driver, at block sizes
 * 16 B ... 64 KiB; optionally the same operations in user space through wolfCrypt
 * (built with -DAFALG_WOLFCRYPT and linked against a static libwolfssl.a).
 *
 *   bsdkm-afalg [-t MS] [-s SIZE,SIZE,...] [PATH...]
 *   bsdkm-afalg -w BYTES [-s SIZE,SIZE,...] [-x SECTION,SECTION,...]
 *
 * PATH is one of:
 *   lkcapi   AF_ALG bound to the driver wolfCrypt registered (module libwolfssl in /proc/crypto)
 *   kernel   AF_ALG bound to the kernel's own driver (best non-wolfCrypt driver, else a template;
 *            for hmac(x) the hmac template over the kernel's best own x driver)
 *   name     AF_ALG bound by the generic algorithm name (what the kernel picks by priority)
 *   user     wolfCrypt in user space (only when built with AFALG_WOLFCRYPT)
 * Default: every path this build supports. -t is the time spent per (path, alg, size), in ms
 * of CLOCK_MONOTONIC (default 100); each measurement does at least two operations.
 *
 * Output, one fact a line (the format bsdkm-ci's afalg parser reads):
 *   afalg-bench: begin version=1 budget_ms=100 sizes=16,64,... paths=lkcapi,kernel,name,user
 *   afalg-proc: name=gcm(aes) driver=gcm-aes-aesni-wolfcrypt module=libwolfssl priority=100000 type=aead
 *   afalg-bound: path=lkcapi alg=gcm(aes) requested=gcm-aes-... driver=gcm-aes-... module=libwolfssl
 *                priority=100000            (driver whose /proc/crypto refcnt rose on bind; "?" if none)
 *   afalg-result: path=lkcapi alg=gcm(aes) driver=... bytes=16 ops=5120 ns=100012345
 *   afalg-error: path=kernel alg=gcm(aes) stage=bind errno=2 (No such file or directory)
 *   afalg-bench: end results=84 errors=0
 * A log without the end line was cut off. Exit status: 0, or 1 when any measurement failed.
 *
 * -w BYTES is the fixed-work mode, for counting instructions (QEMU's bsdkm-count plugin): the
 * lkcapi path only, every (alg, size) an item of BYTES bytes (BYTES / size operations, at least
 * one) bracketed by a start and a stop signal (bsdkm_signal.h) that carry the boot's nonce
 * (environment BSDKM_CI_NONCE) and the base of the module's .text (/sys/module/libwolfssl/
 * sections/.text). Binding and keying happen outside the bracket. Before the first item, each
 * other executable section of the module the host names with -x (.text.unlikely, .noinstr.text,
 * ...) is declared to the plugin as range N (its 1-based place in the list) at the address
 * /sys/module/libwolfssl/sections/<name> gives, so code outside .text is counted too. Item I is
 * alg I / nsizes, size I % nsizes, in the order of the lines below:
 *   afalg-count: begin version=1 bytes=65536 sizes=16,1024 base=0xffffffffc0a00000
 *   afalg-count: range number=1 name=.text.unlikely base=0xffffffffc0a9f000
 *   afalg-count: item index=0 alg=gcm(aes) driver=gcm-aes-... bytes=16 ops=4096 rc=0
 *   afalg-count: skip index=4 alg=cbc(aes) reason=bind errno=2
 *   afalg-count: end items=8 skipped=0
 *
 * Built with `gcc -static -O2` so it runs from a bare initramfs.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/if_alg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "bsdkm_signal.h"

#ifdef AFALG_WOLFCRYPT
#include <wolfssl/options.h>
#include <wolfssl/wolfcrypt/settings.h>
#include <wolfssl/wolfcrypt/aes.h>
#include <wolfssl/wolfcrypt/hmac.h>
#include <wolfssl/wolfcrypt/sha256.h>
#endif

#ifndef SOL_ALG
#define SOL_ALG 279
#endif

#define MAX_BLOCK 65536
#define TAG_LEN 16
#define MAX_ENTRIES 256

enum kind { AEAD, SKCIPHER, HASH };

struct alg {
    const char *name;   /* AF_ALG salg_name and /proc/crypto "name" */
    const char *type;   /* AF_ALG salg_type */
    enum kind kind;
    unsigned key_len, iv_len, out_len;
    /* Kernel drivers to try when /proc/crypto lists no non-wolfCrypt driver yet
     * (templates are instantiated on demand, so they only appear once used). */
    const char *fallbacks[4];
};

static const struct alg ALGS[] = {
    {"gcm(aes)", "aead", AEAD, 16, 12, 0,
     {"generic-gcm-aesni", "gcm_base(ctr(aes-aesni),ghash-generic)", "gcm_base(ctr(aes-generic),ghash-generic)", 0}},
    {"cbc(aes)", "skcipher", SKCIPHER, 16, 16, 0, {"cbc-aes-aesni", "cbc(aes-aesni)", "cbc(aes-generic)", 0}},
    {"sha256", "hash", HASH, 0, 0, 32, {"sha256-generic", 0, 0, 0}},
    {"hmac(sha256)", "hash", HASH, 32, 0, 32, {"hmac(sha256-generic)", 0, 0, 0}},
};
#define NALGS (sizeof(ALGS) / sizeof(ALGS[0]))

struct entry {
    char name[128], driver[128], module[64], type[32];
    int priority, refcnt, internal;
};

static struct entry entries[MAX_ENTRIES];
static int nentries;
static long budget_ns = 100L * 1000 * 1000;
static unsigned sizes[16] = {16, 64, 256, 1024, 4096, 16384, 65536};
static int nsizes = 7;
static int results, errors;
static unsigned char inbuf[MAX_BLOCK], outbuf[MAX_BLOCK + TAG_LEN + 64];
static const unsigned char key[32] = "0123456789abcdef0123456789abcdef";
static const unsigned char ivbuf[16] = "fedcba9876543210";

static long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000L + ts.tv_nsec;
}

static void trim(char *s)
{
    size_t n = strlen(s);
    while (n && (s[n - 1] == '\n' || s[n - 1] == ' '))
        s[--n] = 0;
}

/* Re-read /proc/crypto: one entry per "name" block. */
static int read_proc_crypto(void)
{
    FILE *f = fopen("/proc/crypto", "r");
    char line[256];
    struct entry *e = NULL;
    nentries = 0;
    if (!f)
        return -1;
    while (fgets(line, sizeof line, f)) {
        char *colon = strchr(line, ':');
        char *val;
        if (!colon)
            continue;
        val = colon + 1;
        while (*val == ' ')
            val++;
        trim(val);
        *colon = 0;
        trim(line);
        if (strcmp(line, "name") == 0) {
            if (nentries >= MAX_ENTRIES)
                break;
            e = &entries[nentries++];
            memset(e, 0, sizeof *e);
            snprintf(e->name, sizeof e->name, "%s", val);
        } else if (!e) {
            continue;
        } else if (strcmp(line, "driver") == 0) {
            snprintf(e->driver, sizeof e->driver, "%s", val);
        } else if (strcmp(line, "module") == 0) {
            snprintf(e->module, sizeof e->module, "%s", val);
        } else if (strcmp(line, "type") == 0) {
            snprintf(e->type, sizeof e->type, "%s", val);
        } else if (strcmp(line, "priority") == 0) {
            e->priority = atoi(val);
        } else if (strcmp(line, "refcnt") == 0) {
            e->refcnt = atoi(val);
        } else if (strcmp(line, "internal") == 0) {
            e->internal = strcmp(val, "yes") == 0;
        }
    }
    fclose(f);
    return 0;
}


/* Highest-priority usable driver for an algorithm name, wolfCrypt's or not. */
static const struct entry *best_driver(const char *name, int want_wolfcrypt)
{
    const struct entry *best = NULL;
    for (int i = 0; i < nentries; i++) {
        const struct entry *e = &entries[i];
        int is_wolf = strcmp(e->module, "libwolfssl") == 0;
        if (strcmp(e->name, name) != 0 || e->internal || is_wolf != want_wolfcrypt)
            continue;
        if (!best || e->priority > best->priority)
            best = e;
    }
    return best;
}

static void print_proc(void)
{
    for (unsigned a = 0; a < NALGS; a++)
        for (int i = 0; i < nentries; i++) {
            const struct entry *e = &entries[i];
            if (strcmp(e->name, ALGS[a].name) != 0)
                continue;
            printf("afalg-proc: name=%s driver=%s module=%s priority=%d type=%s internal=%s\n", e->name,
                   e->driver, e->module[0] ? e->module : "?", e->priority, e->type[0] ? e->type : "?",
                   e->internal ? "yes" : "no");
        }
}

static void fail(const char *path, const struct alg *alg, const char *stage, int err)
{
    errors++;
    printf("afalg-error: path=%s alg=%s stage=%s errno=%d (%s)\n", path, alg->name, stage, err, strerror(err));
    fflush(stdout);
}

/* Bind a transform socket to `salg_name` (a generic name or a driver name); -errno on failure. */
static int bind_alg(const struct alg *alg, const char *salg_name)
{
    struct sockaddr_alg sa;
    int fd = socket(AF_ALG, SOCK_SEQPACKET, 0);
    if (fd < 0)
        return -errno;
    memset(&sa, 0, sizeof sa);
    sa.salg_family = AF_ALG;
    snprintf((char *)sa.salg_type, sizeof sa.salg_type, "%s", alg->type);
    snprintf((char *)sa.salg_name, sizeof sa.salg_name, "%s", salg_name);
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
        int err = errno;
        close(fd);
        return -err;
    }
    return fd;
}

static int setup_tfm(int fd, const struct alg *alg)
{
    if (alg->key_len && setsockopt(fd, SOL_ALG, ALG_SET_KEY, key, alg->key_len) < 0)
        return -errno;
    if (alg->kind == AEAD && setsockopt(fd, SOL_ALG, ALG_SET_AEAD_AUTHSIZE, NULL, TAG_LEN) < 0)
        return -errno;
    return 0;
}

static int read_full(int fd, unsigned char *buf, size_t len)
{
    size_t got = 0;
    while (got < len) {
        ssize_t n = read(fd, buf + got, len - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return n < 0 ? -errno : -EIO;
        got += (size_t)n;
    }
    return 0;
}

/* One operation on an accepted op socket; 0 or -errno. */
static int afalg_op(int op, const struct alg *alg, unsigned len)
{
    if (alg->kind == HASH) {
        if (send(op, inbuf, len, 0) != (ssize_t)len)
            return -errno;
        return read_full(op, outbuf, alg->out_len);
    }
    char cbuf[CMSG_SPACE(sizeof(uint32_t)) + CMSG_SPACE(sizeof(struct af_alg_iv) + 16) +
              CMSG_SPACE(sizeof(uint32_t))];
    struct msghdr msg;
    struct iovec iov = {inbuf, len};
    struct cmsghdr *c;
    struct af_alg_iv *iv;
    memset(cbuf, 0, sizeof cbuf);
    memset(&msg, 0, sizeof msg);
    msg.msg_control = cbuf;
    msg.msg_controllen = alg->kind == AEAD ? sizeof cbuf
                                           : CMSG_SPACE(sizeof(uint32_t)) +
                                                 CMSG_SPACE(sizeof(struct af_alg_iv) + 16);
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_ALG;
    c->cmsg_type = ALG_SET_OP;
    c->cmsg_len = CMSG_LEN(sizeof(uint32_t));
    *(uint32_t *)CMSG_DATA(c) = ALG_OP_ENCRYPT;
    c = CMSG_NXTHDR(&msg, c);
    c->cmsg_level = SOL_ALG;
    c->cmsg_type = ALG_SET_IV;
    c->cmsg_len = CMSG_LEN(sizeof(struct af_alg_iv) + alg->iv_len);
    iv = (struct af_alg_iv *)CMSG_DATA(c);
    iv->ivlen = alg->iv_len;
    memcpy(iv->iv, ivbuf, alg->iv_len);
    if (alg->kind == AEAD) {
        c = CMSG_NXTHDR(&msg, c);
        c->cmsg_level = SOL_ALG;
        c->cmsg_type = ALG_SET_AEAD_ASSOCLEN;
        c->cmsg_len = CMSG_LEN(sizeof(uint32_t));
        *(uint32_t *)CMSG_DATA(c) = 0;
    }
    if (sendmsg(op, &msg, 0) != (ssize_t)len)
        return -errno;
    return read_full(op, outbuf, len + (alg->kind == AEAD ? TAG_LEN : 0));
}

static void result(const char *path, const struct alg *alg, const char *driver, unsigned len, long ops,
                   long ns)
{
    results++;
    printf("afalg-result: path=%s alg=%s driver=%s bytes=%u ops=%ld ns=%ld\n", path, alg->name, driver, len,
           ops, ns);
    fflush(stdout);
}

/* The driver whose refcnt rose between two /proc/crypto snapshots: the one the bind used. */
static const struct entry *bound_driver(const struct entry *before, int nbefore)
{
    read_proc_crypto();
    for (int i = 0; i < nentries; i++) {
        const struct entry *e = &entries[i];
        int was = -1;
        if (e->internal)
            continue;
        for (int j = 0; j < nbefore; j++)
            if (strcmp(before[j].driver, e->driver) == 0)
                was = before[j].refcnt;
        if (was >= 0 && e->refcnt > was)
            return e;
    }
    return NULL;
}

static void measure_afalg(const char *path, const struct alg *alg, const char *salg_name)
{
    static struct entry before[MAX_ENTRIES];
    int nbefore, tfm, op, rc;
    const struct entry *used;
    read_proc_crypto();
    nbefore = nentries;
    memcpy(before, entries, sizeof(struct entry) * (size_t)nentries);
    tfm = bind_alg(alg, salg_name);
    if (tfm < 0) {
        fail(path, alg, "bind", -tfm);
        return;
    }
    if ((rc = setup_tfm(tfm, alg)) < 0) {
        fail(path, alg, "setkey", -rc);
        close(tfm);
        return;
    }
    op = accept(tfm, NULL, 0);
    if (op < 0) {
        fail(path, alg, "accept", errno);
        close(tfm);
        return;
    }
    used = bound_driver(before, nbefore);
    printf("afalg-bound: path=%s alg=%s requested=%s driver=%s module=%s priority=%d\n", path, alg->name,
           salg_name, used ? used->driver : "?", used && used->module[0] ? used->module : "?",
           used ? used->priority : -1);
    for (int s = 0; s < nsizes; s++) {
        long start = now_ns(), elapsed = 0, ops = 0;
        do {
            if ((rc = afalg_op(op, alg, sizes[s])) < 0)
                break;
            ops++;
            elapsed = now_ns() - start;
        } while (elapsed < budget_ns || ops < 2);
        if (rc < 0) {
            fail(path, alg, "operation", -rc);
            break;
        }
        result(path, alg, used ? used->driver : salg_name, sizes[s], ops, elapsed);
    }
    close(op);
    close(tfm);
}

static void run_afalg_path(const char *path, const struct alg *alg)
{
    const struct entry *e;
    read_proc_crypto();
    if (strcmp(path, "name") == 0) {
        measure_afalg(path, alg, alg->name);
        return;
    }
    if (strcmp(path, "kernel") == 0 && strncmp(alg->name, "hmac(", 5) == 0) {
        /* What the kernel builds for hmac(x) without wolfCrypt: the hmac template over its best
         * own x driver (only instantiated templates are in /proc/crypto, often just -generic). */
        char inner[64], tmpl[160];
        const struct entry *base;
        snprintf(inner, sizeof inner, "%.*s", (int)(strlen(alg->name) - 6), alg->name + 5);
        base = best_driver(inner, 0);
        if (base) {
            int fd;
            snprintf(tmpl, sizeof tmpl, "hmac(%s)", base->driver);
            if ((fd = bind_alg(alg, tmpl)) >= 0) {
                close(fd);
                measure_afalg(path, alg, tmpl);
                return;
            }
        }
    }
    e = best_driver(alg->name, strcmp(path, "lkcapi") == 0);
    if (e) {
        measure_afalg(path, alg, e->driver);
        return;
    }
    if (strcmp(path, "lkcapi") == 0) {
        fail(path, alg, "find-driver", ENOENT);
        return;
    }
    for (int i = 0; alg->fallbacks[i]; i++) {
        int fd = bind_alg(alg, alg->fallbacks[i]);
        if (fd >= 0) {
            close(fd);
            measure_afalg(path, alg, alg->fallbacks[i]);
            return;
        }
    }
    fail(path, alg, "find-driver", ENOENT);
}

#define SECTIONS_DIR "/sys/module/libwolfssl/sections/"
#define TEXT_BASE_FILE SECTIONS_DIR ".text"
#define MAX_SECTIONS 63

static int read_section_base(const char *name, uint64_t *base)
{
    char path[256];
    FILE *f;
    unsigned long long v = 0;
    int ok;
    if (strlen(name) > 64 || strchr(name, '/'))
        return -1;
    snprintf(path, sizeof path, SECTIONS_DIR "%s", name);
    f = fopen(path, "r");
    if (!f)
        return -1;
    ok = fscanf(f, "%llx", &v) == 1 && v != 0; /* 0: addresses hidden (kptr_restrict) */
    fclose(f);
    *base = v;
    return ok ? 0 : -1;
}

static int read_text_base(uint64_t *base)
{
    return read_section_base(".text", base);
}

/* The sections the host named (-x), declared to the plugin as ranges 1, 2, ... */
static char *sections[MAX_SECTIONS];
static int nsections;

static int parse_sections(char *list)
{
    for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ",")) {
        if (nsections == MAX_SECTIONS)
            return -1;
        sections[nsections++] = tok;
    }
    return 0;
}

static int declare_sections(const uint64_t nonce[2])
{
    for (int i = 0; i < nsections; i++) {
        uint64_t base;
        if (read_section_base(sections[i], &base) != 0) {
            printf("afalg-count: error reason=no-section-base name=%s\n", sections[i]);
            return -1;
        }
        /* Size 0: the plugin takes the section's size from the host, which read the .ko. */
        if (bsdkm_signal('R', nonce, base, (uint64_t)(i + 1) << 48) != 0) {
            printf("afalg-count: error reason=signal errno=%d\n", errno);
            return -1;
        }
        printf("afalg-count: range number=%d name=%s base=0x%llx\n", i + 1, sections[i],
               (unsigned long long)base);
    }
    return 0;
}

static void count_skip(unsigned index, const struct alg *alg, const char *stage, int err)
{
    printf("afalg-count: skip index=%u alg=%s reason=%s errno=%d\n", index, alg->name, stage, err);
    fflush(stdout);
}

/* The fixed-work mode: each (alg, size) BYTES bytes through wolfCrypt's driver, signalled. */
static int run_count(long work_bytes)
{
    uint64_t nonce[2], base;
    int counted = 0, skipped = 0;
    if (bsdkm_parse_nonce(getenv("BSDKM_CI_NONCE"), nonce) != 0) {
        printf("afalg-count: error reason=no-nonce (BSDKM_CI_NONCE is not 32 hex digits)\n");
        return 1;
    }
    if (read_text_base(&base) != 0) {
        printf("afalg-count: error reason=no-text-base (%s unreadable)\n", TEXT_BASE_FILE);
        return 1;
    }
    read_proc_crypto();
    printf("afalg-count: begin version=1 bytes=%ld sizes=", work_bytes);
    for (int s = 0; s < nsizes; s++)
        printf("%s%u", s ? "," : "", sizes[s]);
    printf(" base=0x%llx\n", (unsigned long long)base);
    if (declare_sections(nonce) != 0) {
        fflush(stdout);
        return 1;
    }
    fflush(stdout);
    for (unsigned a = 0; a < NALGS; a++) {
        const struct alg *alg = &ALGS[a];
        const struct entry *e = best_driver(alg->name, 1);
        int tfm = -1, op = -1, rc = 0;
        if (!e)
            rc = -ENOENT;
        else if ((tfm = bind_alg(alg, e->driver)) < 0)
            rc = tfm;
        else if ((rc = setup_tfm(tfm, alg)) == 0 && (op = accept(tfm, NULL, 0)) < 0)
            rc = -errno;
        for (int s = 0; s < nsizes; s++) {
            unsigned index = a * (unsigned)nsizes + (unsigned)s;
            long ops = work_bytes / sizes[s] > 0 ? work_bytes / sizes[s] : 1, done = 0;
            int orc = 0;
            if (rc < 0) {
                count_skip(index, alg, !e ? "find-driver" : tfm < 0 ? "bind" : "setup", -rc);
                skipped++;
                continue;
            }
            /* One untimed, uncounted operation first: the same lazy set-up in every item. */
            if ((orc = afalg_op(op, alg, sizes[s])) < 0) {
                count_skip(index, alg, "operation", -orc);
                skipped++;
                continue;
            }
            if (bsdkm_signal('S', nonce, base, index) != 0) {
                count_skip(index, alg, "signal", errno);
                skipped++;
                continue;
            }
            while (done < ops && (orc = afalg_op(op, alg, sizes[s])) == 0)
                done++;
            bsdkm_signal('E', nonce, base, index);
            printf("afalg-count: item index=%u alg=%s driver=%s bytes=%u ops=%ld rc=%d\n", index, alg->name,
                   e->driver, sizes[s], done, orc);
            fflush(stdout);
            counted++;
        }
        if (op >= 0)
            close(op);
        if (tfm >= 0)
            close(tfm);
    }
    printf("afalg-count: end items=%d skipped=%d\n", counted, skipped);
    fflush(stdout);
    return skipped ? 1 : 0;
}

#ifdef AFALG_WOLFCRYPT
static int user_op(const struct alg *alg, unsigned len, Aes *aes, Hmac *hmac)
{
    byte tag[TAG_LEN];
    wc_Sha256 sha;
    int rc;
    switch (alg->kind) {
    case AEAD:
        return wc_AesGcmEncrypt(aes, outbuf, inbuf, len, ivbuf, alg->iv_len, tag, TAG_LEN, NULL, 0);
    case SKCIPHER:
        /* A fresh IV per operation, as each AF_ALG request carries its own. */
        if ((rc = wc_AesSetIV(aes, ivbuf)) != 0)
            return rc;
        return wc_AesCbcEncrypt(aes, outbuf, inbuf, len);
    case HASH:
        if (alg->key_len) {
            if ((rc = wc_HmacUpdate(hmac, inbuf, len)) != 0)
                return rc;
            return wc_HmacFinal(hmac, outbuf);
        }
        if ((rc = wc_InitSha256(&sha)) != 0)
            return rc;
        if ((rc = wc_Sha256Update(&sha, inbuf, len)) != 0)
            return rc;
        rc = wc_Sha256Final(&sha, outbuf);
        wc_Sha256Free(&sha);
        return rc;
    }
    return -1;
}

static void run_user_path(const struct alg *alg)
{
    Aes aes;
    Hmac hmac;
    int rc = 0;
    wc_AesInit(&aes, NULL, INVALID_DEVID);
    wc_HmacInit(&hmac, NULL, INVALID_DEVID);
    if (alg->kind == AEAD)
        rc = wc_AesGcmSetKey(&aes, key, alg->key_len);
    else if (alg->kind == SKCIPHER)
        rc = wc_AesSetKey(&aes, key, alg->key_len, ivbuf, AES_ENCRYPTION);
    else if (alg->key_len)
        rc = wc_HmacSetKey(&hmac, WC_SHA256, key, alg->key_len);
    if (rc != 0) {
        printf("afalg-error: path=user alg=%s stage=setkey errno=0 (wolfCrypt error %d)\n", alg->name, rc);
        errors++;
        return;
    }
    printf("afalg-bound: path=user alg=%s requested=wolfcrypt driver=wolfcrypt-user module=user priority=-1\n",
           alg->name);
    for (int s = 0; s < nsizes; s++) {
        long start = now_ns(), elapsed = 0, ops = 0;
        do {
            if ((rc = user_op(alg, sizes[s], &aes, &hmac)) != 0)
                break;
            ops++;
            elapsed = now_ns() - start;
        } while (elapsed < budget_ns || ops < 2);
        if (rc != 0) {
            printf("afalg-error: path=user alg=%s stage=operation errno=0 (wolfCrypt error %d)\n", alg->name,
                   rc);
            errors++;
            break;
        }
        result("user", alg, "wolfcrypt-user", sizes[s], ops, elapsed);
    }
    wc_AesFree(&aes);
    wc_HmacFree(&hmac);
}
#define DEFAULT_PATHS "lkcapi,kernel,name,user"
#else
#define DEFAULT_PATHS "lkcapi,kernel,name"
#endif

static int parse_sizes(char *arg)
{
    nsizes = 0;
    for (char *tok = strtok(arg, ","); tok && nsizes < 16; tok = strtok(NULL, ",")) {
        long v = strtol(tok, NULL, 10);
        if (v < 16 || v > MAX_BLOCK || v % 16)
            return -1;
        sizes[nsizes++] = (unsigned)v;
    }
    return nsizes ? 0 : -1;
}

int main(int argc, char **argv)
{
    int opt, npaths;
    long work_bytes = 0;
    char defaults[] = DEFAULT_PATHS;
    char *paths[8];
    while ((opt = getopt(argc, argv, "t:s:w:x:")) != -1) {
        if (opt == 'w' && atol(optarg) > 0) {
            work_bytes = atol(optarg);
        } else if (opt == 'x' && parse_sections(optarg) == 0) {
            continue;
        } else if (opt == 't' && atol(optarg) > 0) {
            budget_ns = atol(optarg) * 1000L * 1000;
        } else if (opt == 's' && parse_sizes(optarg) == 0) {
            continue;
        } else {
            fprintf(stderr, "usage: bsdkm-afalg [-t MS] [-s SIZE,...] [lkcapi|kernel|name|user ...]\n"
                            "       bsdkm-afalg -w BYTES [-s SIZE,...] [-x SECTION,...]\n"
                            "  sizes: multiples of 16 from 16 to %d\n", MAX_BLOCK);
            return 2;
        }
    }
    for (unsigned i = 0; i < sizeof inbuf; i++)
        inbuf[i] = (unsigned char)(i * 7);
    if (work_bytes)
        return run_count(work_bytes);
    npaths = 0;
    if (optind < argc) {
        for (int i = optind; i < argc && npaths < 8; i++)
            paths[npaths++] = argv[i];
    } else {
        for (char *tok = strtok(defaults, ","); tok; tok = strtok(NULL, ","))
            paths[npaths++] = tok;
    }
    for (int i = 0; i < npaths; i++) {
        int known = !strcmp(paths[i], "lkcapi") || !strcmp(paths[i], "kernel") || !strcmp(paths[i], "name");
#ifdef AFALG_WOLFCRYPT
        known = known || !strcmp(paths[i], "user");
#endif
        if (!known) {
            fprintf(stderr, "bsdkm-afalg: unknown or unsupported path '%s'\n", paths[i]);
            return 2;
        }
    }
    for (unsigned i = 0; i < sizeof inbuf; i++)
        inbuf[i] = (unsigned char)(i * 7);
    printf("afalg-bench: begin version=1 budget_ms=%ld sizes=", budget_ns / 1000000);
    for (int s = 0; s < nsizes; s++)
        printf("%s%u", s ? "," : "", sizes[s]);
    printf(" paths=");
    for (int i = 0; i < npaths; i++)
        printf("%s%s", i ? "," : "", paths[i]);
    printf("\n");
    if (read_proc_crypto() < 0)
        printf("afalg-error: path=- alg=- stage=proc-crypto errno=%d (%s)\n", errno, strerror(errno));
    print_proc();
    fflush(stdout);
    for (unsigned a = 0; a < NALGS; a++)
        for (int i = 0; i < npaths; i++) {
#ifdef AFALG_WOLFCRYPT
            if (strcmp(paths[i], "user") == 0) {
                run_user_path(&ALGS[a]);
                continue;
            }
#endif
            run_afalg_path(paths[i], &ALGS[a]);
        }
    /* Drivers instantiated by the binds above (templates) are listed now too. */
    read_proc_crypto();
    print_proc();
    printf("afalg-bench: end results=%d errors=%d\n", results, errors);
    fflush(stdout);
    return errors ? 1 : 0;
}
