/*
 * The toy guest's program, in the place of Linux's /init or FreeBSD's kldinit: it prints the
 * harness's markers with this boot's nonce (read from the multiboot command line), loads the toy
 * module (calls its init), does the counted work between the counting plugin's signals when the
 * host asks (count_bytes=, count_sizes=), unloads the module and ends QEMU (isa-debug-exit).
 */
#include <stdint.h>

int toy_module_init(void);
void toy_module_exit(void);
unsigned toy_sum(const unsigned char *buf, unsigned long len);
extern unsigned char __module_start[], __module_end[];

#define MAX_SIZES 16
#define WORK_BYTES 65536

static char nonce[33];
static uint64_t nonce_half[2];
static unsigned long count_bytes, count_sizes[MAX_SIZES];
static int count_nsizes;
static unsigned char work[WORK_BYTES];
static unsigned char stubs[256][64] __attribute__((aligned(64)));
static int next_stub;
static volatile unsigned sink;

static void outb(uint16_t port, uint8_t value)
{
    __asm__ volatile("outb %0, %1" : : "a"(value), "Nd"(port));
}

void toy_print(const char *text)
{
    while (*text)
        outb(0x3f8, (uint8_t)*text++);
}

static void print_num(unsigned long v)
{
    char buf[24];
    int i = sizeof buf - 1;
    buf[i] = '\0';
    do
        buf[--i] = (char)('0' + v % 10);
    while (v /= 10);
    toy_print(buf + i);
}

static void print_hex(unsigned long v)
{
    char buf[20];
    int i = sizeof buf - 1;
    buf[i] = '\0';
    do
        buf[--i] = "0123456789abcdef"[v & 15];
    while (v >>= 4);
    toy_print(buf + i);
}

/* "### bsdkm-ci: <body><num> nonce=<nonce>" (num < 0: none) */
static void mark(const char *body, long num)
{
    toy_print("### bsdkm-ci: ");
    toy_print(body);
    if (num != -1000) {
        if (num < 0) {
            toy_print("-");
            num = -num;
        }
        print_num((unsigned long)num);
    }
    toy_print(" nonce=");
    toy_print(nonce);
    toy_print("\n");
}

static int starts(const char *s, const char *prefix)
{
    while (*prefix)
        if (*s++ != *prefix++)
            return 0;
    return 1;
}

static unsigned long number(const char **p)
{
    unsigned long v = 0;
    while (**p >= '0' && **p <= '9')
        v = v * 10 + (unsigned long)(*(*p)++ - '0');
    return v;
}

static void read_command_line(const char *p)
{
    while (*p) {
        if (starts(p, "nonce=")) {
            p += 6;
            for (int i = 0; i < 32 && *p && *p != ' '; i++, p++) {
                int d = *p <= '9' ? *p - '0' : *p - 'a' + 10;
                nonce[i] = *p;
                nonce_half[i / 16] = nonce_half[i / 16] << 4 | (uint64_t)d;
            }
        } else if (starts(p, "count_bytes=")) {
            p += 12;
            count_bytes = number(&p);
        } else if (starts(p, "count_sizes=")) {
            p += 12;
            while (count_nsizes < MAX_SIZES) {
                count_sizes[count_nsizes++] = number(&p);
                if (*p != ',')
                    break;
                p++;
            }
        }
        while (*p && *p != ' ')
            p++;
        while (*p == ' ')
            p++;
    }
}

static void put_movabs(unsigned char *at, uint64_t value)
{
    at[0] = 0x49; /* REX.W+B */
    at[1] = 0xbb; /* mov imm64, %r11 */
    for (int i = 0; i < 8; i++)
        at[2 + i] = (unsigned char)(value >> (8 * i));
}

/* One signal for the counting plugin: a stub written where no code ran before, then called. */
static void count_signal(char kind, uint64_t base, uint64_t index)
{
    static const unsigned char marker[6] = {0x0f, 0x1f, 0x80, 'B', 'K', 'C'};
    unsigned char *stub = stubs[next_stub++ % 256];
    uint64_t imm[4] = {nonce_half[0], nonce_half[1], base, index};
    for (int i = 0; i < 6; i++)
        stub[i] = marker[i];
    stub[6] = (unsigned char)kind;
    for (int i = 0; i < 4; i++)
        put_movabs(stub + 7 + 10 * i, imm[i]);
    stub[47] = 0xc3; /* ret */
    __asm__ volatile("call *%0" : : "r"(stub) : "r11", "memory");
}

static void count_work(void)
{
    uint64_t text = (uint64_t)__module_start, size = (uint64_t)(__module_end - __module_start);
    toy_print("toy-count: begin version=1 bytes=");
    print_num(count_bytes);
    toy_print(" sizes=");
    for (int s = 0; s < count_nsizes; s++) {
        if (s)
            toy_print(",");
        print_num(count_sizes[s]);
    }
    toy_print(" base=0x");
    print_hex(text);
    toy_print("\n");
    count_signal('R', text, (1ULL << 48) | size);
    for (int s = 0; s < count_nsizes; s++) {
        unsigned long len = count_sizes[s], ops = count_bytes / len ? count_bytes / len : 1;
        count_signal('S', text, (uint64_t)s);
        for (unsigned long i = 0; i < ops; i++)
            sink += toy_sum(work, len);
        count_signal('E', text, (uint64_t)s);
        toy_print("toy-count: item index=");
        print_num((unsigned long)s);
        toy_print(" alg=sum driver=toy bytes=");
        print_num(len);
        toy_print(" ops=");
        print_num(ops);
        toy_print(" rc=0\n");
    }
}

void toy_main(uint32_t multiboot_info)
{
    const uint32_t *info = (const uint32_t *)(uintptr_t)multiboot_info;
    int rc;
    if (info[0] & 4)
        read_command_line((const char *)(uintptr_t)info[4]);
    for (unsigned i = 0; i < WORK_BYTES; i++)
        work[i] = (unsigned char)(i * 7);
    toy_print("\n"); /* the firmware leaves its last line open */
    mark("init begin", -1000);
    mark("load begin", -1000);
    rc = toy_module_init();
    mark("load rc=", rc);
    if (rc == 0) {
        mark("listed toy", -1000);
        if (count_bytes && count_nsizes)
            count_work();
        mark("unload begin", -1000);
        toy_module_exit();
        mark("unload rc=", 0);
    }
    mark("poweroff", -1000);
    __asm__ volatile("outl %0, %1" : : "a"(0u), "Nd"((uint16_t)0xf4)); /* isa-debug-exit */
}
