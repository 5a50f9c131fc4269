/*
 * bsdkm-count: a QEMU TCG plugin that counts the guest instructions executed inside a kernel
 * module's code between a start and a stop signal of the guest's harness, per item and per function.
 *
 *   qemu-system-x86_64 ... -plugin bsdkm_count.so,out=PATH,nonce=HEX32,size=N[,syms=PATH][,area=LO-HI]
 *
 *   out    where the counts go (written as they are made; the host reads it after the VM ended)
 *   nonce  this boot's nonce, 32 lowercase hex digits: a signal that does not carry it voids the run
 *   size   bytes of range 0 from its base (the module's .text size, taken from the .ko by the host)
 *   syms   the ranges and their functions: "OFFSET SIZE NAME" lines (hex offsets into range 0), and
 *          after a "range N SIZE NAME" line (1 <= N < 64, SIZE 0: the guest's signal gives it) the
 *          functions of range N: the module's other executable sections, or its whole mapping
 *   area   the guest addresses instrumented at all (default: the x86-64 kernel module area)
 *
 * A signal is a code stub the harness writes into a fresh page and calls. Its first instruction
 * is `nopl 0x?434b42(%rax)` (bytes 0f 1f 80 'B' 'K' 'C' KIND: 'S' start, 'E' stop, 'R' range) and
 * the next four are `movabs $imm64, %r11` carrying the nonce (two halves), a base address and a
 * number: for S and E the base of range 0 and the item's index, for R the base of range N and
 * N << 48 | the range's size in bytes (0: the host's). No register needs to be read: the plugin
 * reads the immediates when it translates the stub. The guest's registers are not visible to a
 * plugin of this API version, and an I/O port write would carry no value the plugin could see.
 *
 * Every range the host lists must be declared before the first start: code the module placed
 * outside .text (another executable section) is counted like .text, never left out.
 *
 * The run is void (no counts at all, the reason written) when a signal carries another nonce,
 * comes from kernel space (the module itself), is malformed, or is out of order (a start while
 * counting, a stop of another item or while idle, a base that differs from the first one given,
 * a range declared while counting, unknown, or never declared before a start).
 *
 * Counting: every translation block in the area gets an inline counter of its executions (no
 * callback, so the guest runs at near plugin-free speed). A start snapshots all counters; a stop
 * takes the difference and credits each block's instructions that lie in a range to the item
 * and to the function holding them (the first range that holds an address takes it; what no
 * function holds is "(no symbol)" in range 0, "(NAME)" in range NAME). A block left early by a
 * fault would be credited in full; crypto code in a module does not fault.
 *
 * Output lines (format version 1):
 *   bsdkm-count: begin version=1 size=N syms=K
 *   bsdkm-count: range number=N size=S base=0x... name=NAME
 *   bsdkm-count: item index=I instructions=N base=0x...
 *   bsdkm-count: func index=I instructions=N name=SYMBOL
 *   bsdkm-count: void reason=TEXT
 *   bsdkm-count: end items=N void=0|1
 *
 * Only the parts of QEMU's plugin ABI (API version 1, as QEMU 7.2 accepts) this plugin uses are
 * declared here, from the documentation; no QEMU header is needed.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the documented plugin ABI (qemu-plugin.h, API version 1) ---- */
typedef uint64_t qemu_plugin_id_t;
typedef struct {
    const char *target_name;
    struct {
        int min;
        int cur;
    } version;
    bool system_emulation;
    union {
        struct {
            int smp_vcpus;
            int max_vcpus;
        } system;
    };
} qemu_info_t;
struct qemu_plugin_tb;
struct qemu_plugin_insn;
enum qemu_plugin_cb_flags { QEMU_PLUGIN_CB_NO_REGS, QEMU_PLUGIN_CB_R_REGS, QEMU_PLUGIN_CB_RW_REGS };
enum qemu_plugin_op { QEMU_PLUGIN_INLINE_ADD_U64 };
typedef void (*qemu_plugin_vcpu_tb_trans_cb_t)(qemu_plugin_id_t id, struct qemu_plugin_tb *tb);
typedef void (*qemu_plugin_vcpu_udata_cb_t)(unsigned int vcpu_index, void *userdata);
typedef void (*qemu_plugin_udata_cb_t)(qemu_plugin_id_t id, void *userdata);

void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id, qemu_plugin_vcpu_tb_trans_cb_t cb);
void qemu_plugin_register_vcpu_tb_exec_inline(struct qemu_plugin_tb *tb, enum qemu_plugin_op op, void *ptr,
                                              uint64_t imm);
void qemu_plugin_register_vcpu_insn_exec_cb(struct qemu_plugin_insn *insn, qemu_plugin_vcpu_udata_cb_t cb,
                                            enum qemu_plugin_cb_flags flags, void *userdata);
void qemu_plugin_register_atexit_cb(qemu_plugin_id_t id, qemu_plugin_udata_cb_t cb, void *userdata);
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *tb);
uint64_t qemu_plugin_tb_vaddr(const struct qemu_plugin_tb *tb);
struct qemu_plugin_insn *qemu_plugin_tb_get_insn(const struct qemu_plugin_tb *tb, size_t idx);
const void *qemu_plugin_insn_data(const struct qemu_plugin_insn *insn);
size_t qemu_plugin_insn_size(const struct qemu_plugin_insn *insn);
uint64_t qemu_plugin_insn_vaddr(const struct qemu_plugin_insn *insn);
void qemu_plugin_outs(const char *string);

__attribute__((visibility("default"))) int qemu_plugin_version = 1;
/* ---- end of the ABI ---- */

#define KERNEL_SPACE 0xffff800000000000ULL
#define SIG_LEN 7
#define MOVABS_LEN 10
#define MAX_RANGES 64
#define RANGE_SIZE_MASK ((1ULL << 48) - 1)

struct block {
    uint64_t execs; /* bumped by the inline op: must stay the first member's address */
    uint64_t snap;
    uint64_t vaddr;
    uint32_t n;
    uint64_t *insn;  /* each instruction's address */
};

struct signal {
    char kind; /* 'S', 'E', 'R', or 'X' (malformed) */
    uint64_t vaddr, nonce_hi, nonce_lo, base, index;
};

struct sym {
    uint64_t off, size;
    char *name;
    uint64_t count;
};

/* Range 0 is .text (its base from the start signal); the others are declared by 'R' signals. */
struct range {
    uint64_t base, size;
    bool listed, declared;
    char name[64];
    struct sym *syms;
    size_t nsyms, cap;
    uint64_t unknown; /* instructions of the range no function holds, in the item being stopped */
};

static FILE *out;
static uint64_t nonce_hi, nonce_lo, area_lo = 0xffffffffa0000000ULL, area_hi = 0xffffffffff000000ULL;
static bool counting, voided;
static uint64_t current, items;
static struct block **blocks;
static size_t nblocks, capblocks;
static struct range ranges[MAX_RANGES];
static size_t nsyms_total;

static void emit(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void emit(const char *fmt, ...)
{
    va_list ap;
    if (!out)
        return;
    va_start(ap, fmt);
    vfprintf(out, fmt, ap);
    va_end(ap);
    fflush(out);
}

static void void_run(const char *why, uint64_t vaddr)
{
    if (voided)
        return;
    voided = true;
    counting = false;
    emit("bsdkm-count: void reason=%s at=0x%" PRIx64 "\n", why, vaddr);
}

static struct sym *sym_at(const struct range *r, uint64_t off)
{
    size_t lo = 0, hi = r->nsyms;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (r->syms[mid].off <= off)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0)
        return NULL;
    struct sym *s = &r->syms[lo - 1];
    return off < s->off + (s->size ? s->size : 1) ? s : NULL;
}

/* The range that holds address a (the first, when they overlap), or NULL. */
static struct range *range_at(uint64_t a)
{
    for (size_t n = 0; n < MAX_RANGES; n++) {
        struct range *r = &ranges[n];
        if (r->declared && r->size && a >= r->base && a - r->base < r->size)
            return r;
    }
    return NULL;
}

static void declare(const struct signal *s)
{
    uint64_t n = s->index >> 48, size = s->index & RANGE_SIZE_MASK;
    struct range *r;
    if (counting) {
        void_run("range-while-counting", s->vaddr);
        return;
    }
    if (n == 0 || n >= MAX_RANGES || !ranges[n].listed) {
        void_run("unknown-range", s->vaddr);
        return;
    }
    r = &ranges[n];
    if (size && r->size && size != r->size) {
        void_run("range-size-changed", s->vaddr);
        return;
    }
    if (r->declared && s->base != r->base) {
        void_run("base-changed", s->vaddr);
        return;
    }
    r->base = s->base;
    r->size = r->size ? r->size : size;
    if (!r->declared)
        emit("bsdkm-count: range number=%" PRIu64 " size=%" PRIu64 " base=0x%" PRIx64 " name=%s\n", n, r->size,
             r->base, r->name);
    r->declared = true;
}

static void start(const struct signal *s)
{
    if (counting) {
        void_run("start-while-counting", s->vaddr);
        return;
    }
    if (ranges[0].declared && s->base != ranges[0].base) {
        void_run("base-changed", s->vaddr);
        return;
    }
    for (size_t n = 1; n < MAX_RANGES; n++) {
        if (ranges[n].listed && (!ranges[n].declared || !ranges[n].size)) {
            /* Code the host knows of but the guest never placed: counting without it could be dodged. */
            void_run("range-not-declared", s->vaddr);
            return;
        }
    }
    ranges[0].base = s->base;
    ranges[0].declared = true;
    current = s->index;
    for (size_t i = 0; i < nblocks; i++)
        blocks[i]->snap = blocks[i]->execs;
    counting = true;
}

static void stop(const struct signal *s)
{
    uint64_t total = 0;
    if (!counting || s->index != current) {
        void_run(counting ? "stop-of-another-item" : "stop-while-idle", s->vaddr);
        return;
    }
    counting = false;
    for (size_t n = 0; n < MAX_RANGES; n++) {
        ranges[n].unknown = 0;
        for (size_t k = 0; k < ranges[n].nsyms; k++)
            ranges[n].syms[k].count = 0;
    }
    for (size_t i = 0; i < nblocks; i++) {
        struct block *b = blocks[i];
        uint64_t delta = b->execs - b->snap;
        if (!delta)
            continue;
        for (uint32_t j = 0; j < b->n; j++) {
            struct range *r = range_at(b->insn[j]);
            if (!r)
                continue;
            total += delta;
            struct sym *sy = sym_at(r, b->insn[j] - r->base);
            if (sy)
                sy->count += delta;
            else
                r->unknown += delta;
        }
    }
    items++;
    emit("bsdkm-count: item index=%" PRIu64 " instructions=%" PRIu64 " base=0x%" PRIx64 "\n", current, total,
         ranges[0].base);
    for (size_t n = 0; n < MAX_RANGES; n++) {
        const struct range *r = &ranges[n];
        for (size_t k = 0; k < r->nsyms; k++)
            if (r->syms[k].count)
                emit("bsdkm-count: func index=%" PRIu64 " instructions=%" PRIu64 " name=%s\n", current,
                     r->syms[k].count, r->syms[k].name);
        if (r->unknown && n == 0)
            emit("bsdkm-count: func index=%" PRIu64 " instructions=%" PRIu64 " name=(no symbol)\n", current,
                 r->unknown);
        else if (r->unknown)
            emit("bsdkm-count: func index=%" PRIu64 " instructions=%" PRIu64 " name=(%s)\n", current, r->unknown,
                 r->name);
    }
}

static void on_signal(unsigned int vcpu, void *udata)
{
    const struct signal *s = udata;
    (void)vcpu;
    if (voided)
        return;
    if (s->vaddr >= KERNEL_SPACE)
        void_run("signal-from-kernel-space", s->vaddr);
    else if (s->kind == 'X')
        void_run("malformed-signal", s->vaddr);
    else if (s->nonce_hi != nonce_hi || s->nonce_lo != nonce_lo)
        void_run("wrong-nonce", s->vaddr);
    else if (s->kind == 'S')
        start(s);
    else if (s->kind == 'R')
        declare(s);
    else
        stop(s);
}

static bool movabs_r11(struct qemu_plugin_insn *insn, uint64_t *imm)
{
    const uint8_t *d = qemu_plugin_insn_data(insn);
    if (qemu_plugin_insn_size(insn) != MOVABS_LEN || d[0] != 0x49 || d[1] != 0xbb)
        return false;
    memcpy(imm, d + 2, 8); /* x86 is little-endian, as the host running this plugin is */
    return true;
}

static void look_for_signal(const struct qemu_plugin_tb *tb, size_t i, size_t n)
{
    struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
    const uint8_t *d = qemu_plugin_insn_data(insn);
    struct signal *s;
    uint64_t v[4];
    if (qemu_plugin_insn_size(insn) != SIG_LEN || d[0] != 0x0f || d[1] != 0x1f || d[2] != 0x80 || d[3] != 'B' ||
        d[4] != 'K' || d[5] != 'C')
        return;
    s = calloc(1, sizeof *s);
    if (!s)
        return;
    s->vaddr = qemu_plugin_insn_vaddr(insn);
    s->kind = (d[6] == 'S' || d[6] == 'E' || d[6] == 'R') ? (char)d[6] : 'X';
    for (int k = 0; k < 4; k++)
        if (i + 1 + k >= n || !movabs_r11(qemu_plugin_tb_get_insn(tb, i + 1 + k), &v[k]))
            s->kind = 'X';
    if (s->kind != 'X') {
        s->nonce_hi = v[0];
        s->nonce_lo = v[1];
        s->base = v[2];
        s->index = v[3];
    }
    /* Kept for as long as the block may run: QEMU may execute a translation many times. */
    qemu_plugin_register_vcpu_insn_exec_cb(insn, on_signal, QEMU_PLUGIN_CB_NO_REGS, s);
}

static void on_translate(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
    size_t n = qemu_plugin_tb_n_insns(tb);
    uint64_t va = qemu_plugin_tb_vaddr(tb);
    (void)id;
    for (size_t i = 0; i < n; i++)
        look_for_signal(tb, i, n);
    if (va < area_lo || va >= area_hi || n == 0)
        return;
    struct block *b = calloc(1, sizeof *b);
    if (!b)
        return;
    b->insn = calloc(n, sizeof *b->insn);
    if (!b->insn) {
        free(b);
        return;
    }
    b->vaddr = va;
    b->n = (uint32_t)n;
    for (size_t i = 0; i < n; i++)
        b->insn[i] = qemu_plugin_insn_vaddr(qemu_plugin_tb_get_insn(tb, i));
    if (nblocks == capblocks) {
        size_t cap = capblocks ? capblocks * 2 : 4096;
        struct block **nb = realloc(blocks, cap * sizeof *nb);
        if (!nb) {
            free(b->insn);
            free(b);
            return;
        }
        blocks = nb;
        capblocks = cap;
    }
    blocks[nblocks++] = b;
    /* A block translated while counting ran 0 times before: its snapshot 0 is right. */
    qemu_plugin_register_vcpu_tb_exec_inline(tb, QEMU_PLUGIN_INLINE_ADD_U64, &b->execs, 1);
}

static void on_vm_exit(qemu_plugin_id_t id, void *udata)
{
    (void)id;
    (void)udata;
    if (counting)
        void_run("no-stop-before-exit", 0);
    emit("bsdkm-count: end items=%" PRIu64 " void=%d\n", items, voided ? 1 : 0);
    if (out)
        fclose(out);
    out = NULL;
}

static int cmp_sym(const void *a, const void *b)
{
    const struct sym *x = a, *y = b;
    return x->off < y->off ? -1 : x->off > y->off;
}

static int add_sym(struct range *r, unsigned long long off, unsigned long long size, const char *name)
{
    if (r->nsyms == r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 1024;
        struct sym *ns = realloc(r->syms, cap * sizeof *ns);
        if (!ns)
            return -1;
        r->syms = ns;
        r->cap = cap;
    }
    r->syms[r->nsyms].off = off;
    r->syms[r->nsyms].size = size;
    r->syms[r->nsyms].name = strdup(name);
    r->syms[r->nsyms].count = 0;
    r->nsyms++;
    nsyms_total++;
    return 0;
}

/* "OFFSET SIZE NAME" lines of range 0, and "range N SIZE NAME" lines, each starting range N. */
static int load_syms(const char *path)
{
    FILE *f = fopen(path, "r");
    char line[512];
    struct range *r = &ranges[0];
    if (!f)
        return -1;
    while (fgets(line, sizeof line, f)) {
        unsigned long long off, size;
        unsigned n;
        char name[400], rname[64];
        if (sscanf(line, "range %u %llx %63s", &n, &size, rname) == 3) {
            if (n == 0 || n >= MAX_RANGES || ranges[n].listed) {
                fclose(f);
                return -1;
            }
            r = &ranges[n];
            r->listed = true;
            r->size = size;
            memcpy(r->name, rname, sizeof r->name);
            continue;
        }
        if (sscanf(line, "%llx %llx %399s", &off, &size, name) != 3)
            continue;
        if (add_sym(r, off, size, name) != 0) {
            fclose(f);
            return -1;
        }
    }
    fclose(f);
    for (size_t k = 0; k < MAX_RANGES; k++)
        if (ranges[k].nsyms)
            qsort(ranges[k].syms, ranges[k].nsyms, sizeof *ranges[k].syms, cmp_sym);
    return 0;
}

static int parse_hex64(const char *s, size_t len, uint64_t *v)
{
    *v = 0;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (d < 0)
            return -1;
        *v = (*v << 4) | (uint64_t)d;
    }
    return 0;
}

static int fail(const char *msg, const char *arg)
{
    char buf[512];
    snprintf(buf, sizeof buf, "bsdkm-count: %s%s%s\n", msg, arg ? ": " : "", arg ? arg : "");
    qemu_plugin_outs(buf);
    fputs(buf, stderr); /* qemu_plugin_outs reaches only a -d plugin log */
    return -1;
}

__attribute__((visibility("default"))) int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info,
                                                               int argc, char **argv)
{
    const char *out_path = NULL, *syms_path = NULL, *nonce = NULL;
    if (!info->system_emulation || strcmp(info->target_name, "x86_64") != 0)
        return fail("needs qemu-system-x86_64", info->target_name);
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (strncmp(a, "out=", 4) == 0) {
            out_path = a + 4;
        } else if (strncmp(a, "syms=", 5) == 0) {
            syms_path = a + 5;
        } else if (strncmp(a, "nonce=", 6) == 0) {
            nonce = a + 6;
        } else if (strncmp(a, "size=", 5) == 0) {
            char *end;
            ranges[0].size = strtoull(a + 5, &end, 0);
            if (*end || !ranges[0].size)
                return fail("size must be a positive number of bytes", a);
        } else if (strncmp(a, "area=", 5) == 0) {
            if (sscanf(a + 5, "%" SCNx64 "-%" SCNx64, &area_lo, &area_hi) != 2 || area_lo >= area_hi)
                return fail("area must be LO-HI in hex", a);
        } else {
            return fail("unknown argument", a);
        }
    }
    if (!out_path || !nonce || !ranges[0].size)
        return fail("out=, nonce= and size= are required", NULL);
    snprintf(ranges[0].name, sizeof ranges[0].name, ".text");
    if (strlen(nonce) != 32 || parse_hex64(nonce, 16, &nonce_hi) || parse_hex64(nonce + 16, 16, &nonce_lo))
        return fail("nonce must be 32 lowercase hex digits", NULL);
    if (syms_path && load_syms(syms_path) != 0)
        return fail("cannot read the symbols", syms_path);
    out = fopen(out_path, "w");
    if (!out)
        return fail("cannot write", out_path);
    emit("bsdkm-count: begin version=1 size=%" PRIu64 " syms=%zu\n", ranges[0].size, nsyms_total);
    qemu_plugin_register_vcpu_tb_trans_cb(id, on_translate);
    qemu_plugin_register_atexit_cb(id, on_vm_exit, NULL);
    return 0;
}
