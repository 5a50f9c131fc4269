/* bsdkm-instr: a fixed amount of work per benchmark item, for counting instructions.
 *
 * wolfCrypt's own benchmark loops for a fixed *time*, so the instructions it executes change
 * with the machine's speed. This program runs each item it is asked for a fixed number of
 * times on a fixed input, linked statically against a variant's libwolfssl.a, so the count
 * under Callgrind depends on the code alone.
 *
 *   bsdkm-instr NAME=AMOUNT[@BLOCK] ...
 *
 * NAME is a wolfCrypt benchmark item name ("AES-128-GCM-enc", "SHA-256", "RSA 2048 public");
 * AMOUNT is bytes for a symmetric item (processed BLOCK bytes per call, default 16384) and
 * operations for an asymmetric one. Set-up (keys, contexts) happens outside
 * bsdkm_measure(); the pipeline counts only inside it (callgrind --toggle-collect) and dumps
 * the counts after each call (--dump-after), one profile part per item, in argument order.
 *
 * Output, one line per item (parsed by buildbot_bsdkm/perf/instruction_counts.py):
 *   bsdkm-instr begin 1
 *   bsdkm-instr item <index> <name> kind=sym|asym amount=<n> block=<n> calls=<n> rc=<code>
 *   bsdkm-instr skip <index> <name> reason=<words>
 *   bsdkm-instr end
 * An item is measured only when it printed "item ... rc=0"; a part is dumped for every
 * item line, whatever its rc, and never for a skipped one.
 */
#include <wolfssl/options.h>
#include <wolfssl/wolfcrypt/settings.h>
#include <wolfssl/wolfcrypt/aes.h>
#include <wolfssl/wolfcrypt/sha256.h>
#include <wolfssl/wolfcrypt/sha512.h>
#include <wolfssl/wolfcrypt/sha3.h>
#include <wolfssl/wolfcrypt/hmac.h>
#include <wolfssl/wolfcrypt/chacha.h>
#include <wolfssl/wolfcrypt/random.h>
#include <wolfssl/wolfcrypt/rsa.h>
#include <wolfssl/wolfcrypt/error-crypt.h>
#ifndef NO_RSA
#define USE_CERT_BUFFERS_2048
#include <wolfssl/certs_test.h>
#endif

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_BLOCK (1024 * 1024)
#ifndef WC_NO_ERR_TRACE
#define WC_NO_ERR_TRACE(x) (x) /* older wolfSSL releases */
#endif

static byte in_buf[MAX_BLOCK + 64];
static byte out_buf[MAX_BLOCK + 64];
static const byte key[32] = {
    0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef, 0xfe, 0xdc, 0xba, 0x98, 0x76, 0x54, 0x32, 0x10,
    0x89, 0xab, 0xcd, 0xef, 0x01, 0x23, 0x45, 0x67, 0xf0, 0xe1, 0xd2, 0xc3, 0xb4, 0xa5, 0x96, 0x87};
static const byte iv[16] = {0x12, 0x34, 0x56, 0x78, 0x90, 0xab, 0xcd, 0xef,
                            0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08};

/* One item's work: its state, how much, and the call that does one unit of it. */
struct work {
    const char *name;
    int asym;
    long amount;  /* bytes (sym) or operations (asym) */
    long block;   /* bytes per call (sym) */
    long calls;
    int (*step)(struct work *w, long i);
    void *ctx;
    int subtype;  /* key size, direction, hash type */
};

#ifndef NO_AES
static Aes aes;
#endif
static union {
#ifndef NO_SHA256
    wc_Sha256 sha256;
#endif
#ifdef WOLFSSL_SHA384
    wc_Sha384 sha384;
#endif
#ifdef WOLFSSL_SHA512
    wc_Sha512 sha512;
#endif
#ifdef WOLFSSL_SHA3
    wc_Sha3 sha3;
#endif
#ifndef NO_HMAC
    Hmac hmac;
#endif
#ifdef HAVE_CHACHA
    ChaCha chacha;
#endif
    int unused;
} hash;
static byte digest[WC_MAX_DIGEST_SIZE];
#ifndef NO_RSA
static RsaKey rsa;
static byte rsa_sig[512];
static word32 rsa_sig_len;
#endif
static WC_RNG rng;
static int rng_ready;

/* Counted: everything the item's calls execute, and nothing else. */
__attribute__((noinline)) int bsdkm_measure(struct work *w)
{
    long i;
    int rc = 0;
    for (i = 0; i < w->calls && rc == 0; i++)
        rc = w->step(w, i);
    return rc;
}

#ifndef NO_AES
#ifdef HAVE_AES_CBC
static int cbc_enc(struct work *w, long i) { (void)i; return wc_AesCbcEncrypt(&aes, out_buf, in_buf, (word32)w->block); }
static int cbc_dec(struct work *w, long i) { (void)i; return wc_AesCbcDecrypt(&aes, out_buf, in_buf, (word32)w->block); }
#endif
#ifdef HAVE_AESGCM
static byte tag[16];
static int gcm_enc(struct work *w, long i)
{
    (void)i;
    return wc_AesGcmEncrypt(&aes, out_buf, in_buf, (word32)w->block, iv, 12, tag, sizeof(tag), NULL, 0);
}
static int gcm_dec(struct work *w, long i)
{
    int rc;
    (void)i;
    /* the tag cannot match random input: the decryption and its GHASH still run in full */
    rc = wc_AesGcmDecrypt(&aes, out_buf, in_buf, (word32)w->block, iv, 12, tag, sizeof(tag), NULL, 0);
    return rc == WC_NO_ERR_TRACE(AES_GCM_AUTH_E) ? 0 : rc;
}
#endif
#endif

#ifndef NO_SHA256
static int sha256_step(struct work *w, long i)
{
    int rc = wc_Sha256Update(&hash.sha256, in_buf, (word32)w->block);
    return (rc == 0 && i == w->calls - 1) ? wc_Sha256Final(&hash.sha256, digest) : rc;
}
#endif
#ifdef WOLFSSL_SHA384
static int sha384_step(struct work *w, long i)
{
    int rc = wc_Sha384Update(&hash.sha384, in_buf, (word32)w->block);
    return (rc == 0 && i == w->calls - 1) ? wc_Sha384Final(&hash.sha384, digest) : rc;
}
#endif
#ifdef WOLFSSL_SHA512
static int sha512_step(struct work *w, long i)
{
    int rc = wc_Sha512Update(&hash.sha512, in_buf, (word32)w->block);
    return (rc == 0 && i == w->calls - 1) ? wc_Sha512Final(&hash.sha512, digest) : rc;
}
#endif
#ifdef WOLFSSL_SHA3
static int sha3_step(struct work *w, long i)
{
    int rc = wc_Sha3_256_Update(&hash.sha3, in_buf, (word32)w->block);
    return (rc == 0 && i == w->calls - 1) ? wc_Sha3_256_Final(&hash.sha3, digest) : rc;
}
#endif
#ifndef NO_HMAC
static int hmac_step(struct work *w, long i)
{
    int rc = wc_HmacUpdate(&hash.hmac, in_buf, (word32)w->block);
    return (rc == 0 && i == w->calls - 1) ? wc_HmacFinal(&hash.hmac, digest) : rc;
}
#endif
#ifdef HAVE_CHACHA
static int chacha_step(struct work *w, long i)
{
    (void)i;
    return wc_Chacha_Process(&hash.chacha, out_buf, in_buf, (word32)w->block);
}
#endif
#ifndef NO_RSA
static int rsa_public(struct work *w, long i)
{
    int rc;
    (void)w;
    (void)i;
    rc = wc_RsaSSL_Verify(rsa_sig, rsa_sig_len, out_buf, sizeof(out_buf), &rsa);
    return rc > 0 ? 0 : (rc == 0 ? -1 : rc);
}
static int rsa_private(struct work *w, long i)
{
    word32 len = sizeof(out_buf);
    int rc;
    (void)w;
    (void)i;
    rc = wc_RsaSSL_Sign(in_buf, 32, out_buf, len, &rsa, &rng);
    return rc > 0 ? 0 : (rc == 0 ? -1 : rc);
}
#endif

static int need_rng(void)
{
    if (!rng_ready && wc_InitRng(&rng) == 0)
        rng_ready = 1;
    return rng_ready ? 0 : -1;
}

#ifndef NO_RSA
static int rsa_setup(void)
{
    word32 idx = 0;
    int rc;
    if (need_rng() != 0)
        return -1;
    if ((rc = wc_InitRsaKey(&rsa, NULL)) != 0)
        return rc;
    if ((rc = wc_RsaPrivateKeyDecode(client_key_der_2048, &idx, &rsa, sizeof_client_key_der_2048)) != 0)
        return rc;
#ifdef WC_RSA_BLINDING
    wc_RsaSetRNG(&rsa, &rng);
#endif
    rc = wc_RsaSSL_Sign(in_buf, 32, rsa_sig, sizeof(rsa_sig), &rsa, &rng);
    if (rc <= 0)
        return rc == 0 ? -1 : rc;
    rsa_sig_len = (word32)rc;
    return 0;
}
#endif

/* Set up ``w`` for its item; 0, or a wolfCrypt error code, or 1 when this build lacks the item. */
static int setup(struct work *w)
{
    const char *n = w->name;
    int bits = 0;
    char mode[8] = "", dir[8] = "";
    int rc;

    if (sscanf(n, "AES-%d-%3[A-Z]-%3s", &bits, mode, dir) == 3 &&
        (bits == 128 || bits == 192 || bits == 256) &&
        (strcmp(dir, "enc") == 0 || strcmp(dir, "dec") == 0)) {
#ifndef NO_AES
        int enc = strcmp(dir, "enc") == 0;
        if ((rc = wc_AesInit(&aes, NULL, INVALID_DEVID)) != 0)
            return rc;
#ifdef HAVE_AES_CBC
        if (strcmp(mode, "CBC") == 0) {
            w->step = enc ? cbc_enc : cbc_dec;
            return wc_AesSetKey(&aes, key, (word32)bits / 8, iv, enc ? AES_ENCRYPTION : AES_DECRYPTION);
        }
#endif
#ifdef HAVE_AESGCM
        if (strcmp(mode, "GCM") == 0) {
            w->step = enc ? gcm_enc : gcm_dec;
            return wc_AesGcmSetKey(&aes, key, (word32)bits / 8);
        }
#endif
#endif
        return 1;
    }
#ifndef NO_SHA256
    if (strcmp(n, "SHA-256") == 0) {
        w->step = sha256_step;
        return wc_InitSha256(&hash.sha256);
    }
#endif
#ifdef WOLFSSL_SHA384
    if (strcmp(n, "SHA-384") == 0) {
        w->step = sha384_step;
        return wc_InitSha384(&hash.sha384);
    }
#endif
#ifdef WOLFSSL_SHA512
    if (strcmp(n, "SHA-512") == 0) {
        w->step = sha512_step;
        return wc_InitSha512(&hash.sha512);
    }
#endif
#ifdef WOLFSSL_SHA3
    if (strcmp(n, "SHA3-256") == 0) {
        w->step = sha3_step;
        return wc_InitSha3_256(&hash.sha3, NULL, INVALID_DEVID);
    }
#endif
#if !defined(NO_HMAC) && !defined(NO_SHA256)
    if (strcmp(n, "HMAC-SHA256") == 0) {
        w->step = hmac_step;
        if ((rc = wc_HmacInit(&hash.hmac, NULL, INVALID_DEVID)) != 0)
            return rc;
        return wc_HmacSetKey(&hash.hmac, WC_SHA256, key, sizeof(key));
    }
#endif
#ifdef HAVE_CHACHA
    if (strcmp(n, "CHACHA") == 0) {
        w->step = chacha_step;
        if ((rc = wc_Chacha_SetKey(&hash.chacha, key, 32)) != 0)
            return rc;
        return wc_Chacha_SetIV(&hash.chacha, iv, 0);
    }
#endif
#ifndef NO_RSA
    if (strcmp(n, "RSA 2048 public") == 0 || strcmp(n, "RSA 2048 private") == 0) {
        w->asym = 1;
        w->step = strcmp(n, "RSA 2048 public") == 0 ? rsa_public : rsa_private;
        return rsa_setup();
    }
#endif
    (void)rc;
    (void)bits;
    return 1;
}

static int known_shape(const char *n)
{
    return strncmp(n, "RSA ", 4) == 0;
}

int main(int argc, char **argv)
{
    int i;
    for (i = 0; i < (int)sizeof(in_buf); i++)
        in_buf[i] = (byte)(i * 31 + 7);
    if (wolfCrypt_Init() != 0) {
        printf("bsdkm-instr error wolfCrypt_Init failed\n");
        return 2;
    }
    printf("bsdkm-instr begin 1\n");
    for (i = 1; i < argc; i++) {
        struct work w;
        char name[128];
        char *eq, *at;
        int rc;
        memset(&w, 0, sizeof(w));
        snprintf(name, sizeof(name), "%s", argv[i]);
        eq = strrchr(name, '=');
        if (eq == NULL) {
            printf("bsdkm-instr skip %d %s reason=no-amount\n", i, name);
            continue;
        }
        *eq = '\0';
        w.name = name;
        w.amount = atol(eq + 1);
        at = strchr(eq + 1, '@');
        w.block = at ? atol(at + 1) : 16384;
        w.asym = known_shape(name);
        if (w.amount <= 0 || w.block <= 0 || w.block > MAX_BLOCK) {
            printf("bsdkm-instr skip %d %s reason=bad-amount\n", i, name);
            continue;
        }
        rc = setup(&w);
        if (rc == 1) {
            printf("bsdkm-instr skip %d %s reason=not-in-this-build\n", i, name);
            continue;
        }
        if (rc != 0) {
            printf("bsdkm-instr skip %d %s reason=setup-failed-%d\n", i, name, rc);
            continue;
        }
        w.calls = w.asym ? w.amount : (w.amount + w.block - 1) / w.block;
        if (!w.asym)
            w.amount = w.calls * w.block;
        fflush(stdout);
        rc = bsdkm_measure(&w);
        printf("bsdkm-instr item %d %s kind=%s amount=%ld block=%ld calls=%ld rc=%d\n", i, name,
               w.asym ? "asym" : "sym", w.amount, w.asym ? 0L : w.block, w.calls, rc);
        fflush(stdout);
    }
    printf("bsdkm-instr end\n");
    if (rng_ready)
        wc_FreeRng(&rng);
    wolfCrypt_Cleanup();
    return 0;
}
