/*
 * kldinit: the whole userland of the freebsd-kmod-qemu guest (bsdkm-ci).
 *
 * The kernel runs it as init (loader.rc sets init_path). It loads the module
 * with kldload(2) after the kernel's clocks run (a module preloaded by the
 * loader runs its init before that, and the benchmark's getnanouptime timer
 * never advances), lists it with kldstat(2), unloads it with kldunload(2),
 * and reboots; QEMU runs with -no-reboot, so the reboot ends the VM.
 *
 * No FreeBSD libc exists on the Linux host that builds this, so it makes raw
 * system calls (numbers from sys/kern/syscalls.master, amd64 convention:
 * number in rax, arguments in rdi rsi rdx, carry flag set on error with the
 * errno in rax). Built with the module's own cross toolchain:
 *   clang --target=x86_64-unknown-freebsd15.0 -static -nostdlib -ffreestanding
 *
 * Every step prints a "### bsdkm-ci:" marker on the console, the same shape the
 * Linux initramfs prints, so the host can tell where a guest stopped. Each marker
 * ends with " nonce=<hex>", this boot's nonce from the kernel environment
 * (bsdkm_ci.nonce, set by the host's loader.rc), which is removed from the
 * environment before the module loads: the module cannot print a marker the host
 * takes for ours.
 *
 * Counted fixed work (crypto-register modules, when the host sets bsdkm_ci.count_*):
 * after kldstat, AES-128-GCM and AES-128-CBC through /dev/crypto, bound to wolfSSL's
 * driver by name, so many bytes at each operation size. GENERIC has device crypto but no
 * device cryptodev, so /dev/crypto is first made by kldloading /cryptodev.ko, the module
 * from the same kernel.txz that the host puts on the FAT root (crypto(4)). Each item runs between a start
 * and a stop signal for the host's QEMU counting plugin (kmod/qemu/bsdkm_count.c): a stub
 * written into a fresh page and called, the same bytes kmod/linux/bsdkm_signal.h makes,
 * carrying the nonce, the module's .text base and the item's number. The base is the
 * module's load address (kldstat) plus the offset the host gives (bsdkm_ci.count_text_off),
 * or, when the host names a global .text function instead, the address kldsym(2) gives it
 * less its offset; given both, they must agree. Before the first item it declares the module's
 * whole mapping (kldstat's address and size: every section FreeBSD's linker placed, executable
 * ones outside .text among them) as the plugin's range 1, so no code of the module goes
 * uncounted. Lines "crypto-count: ..." say what ran, in the shape of the Linux harness's
 * "afalg-count:" lines.
 */

#define SYS_exit 1
#define SYS_write 4
#define SYS_open 5
#define SYS_close 6
#define SYS_ioctl 54
#define SYS_reboot 55
#define SYS_munmap 73
#define SYS_mprotect 74
#define SYS_kldsym 337
#define SYS_mmap 477
#define SYS___sysctlbyname 570
#define SYS_kldload 304
#define SYS_kldunload 305
#define SYS_kldfind 306
#define SYS_kldstat 308
#define SYS_kenv 390

#define KENV_GET 0
#define KENV_UNSET 2
#define NONCE_MAX 64

#define O_RDWR 2
#define EEXIST 17
#define CRYPTODEV_PATH "/cryptodev.ko"
#define RB_NOSYNC 0x004 /* nothing on the FAT root needs syncing: shorter shutdown */
#define MAXPATHLEN 1024

#ifndef MODULE_PATH
#define MODULE_PATH "/libwolfssl.ko"
#endif
#ifndef MODULE_FILE
#define MODULE_FILE "libwolfssl.ko"
#endif

typedef unsigned long size_t;

struct kld_file_stat {
	int version; /* sizeof(struct kld_file_stat) */
	char name[MAXPATHLEN];
	int refs;
	int id;
	char *address;
	size_t size;
	char pathname[MAXPATHLEN];
};

/* ABI note: the kernel's image activator takes this (or EI_OSABI) as "a FreeBSD binary". */
struct abi_note {
	unsigned int namesz, descsz, type;
	char name[8];
	unsigned int desc;
};
__attribute__((section(".note.tag"), aligned(4), used))
static const struct abi_note abi_tag = {8, 4, 1, "FreeBSD", 1500026};

/* Returns the result, or -errno when the kernel set the carry flag. */
static long
sys3(long num, long a, long b, long c)
{
	long ret;
	unsigned char failed;

	__asm__ volatile("syscall; setc %1"
	    : "=a"(ret), "=r"(failed)
	    : "a"(num), "D"(a), "S"(b), "d"(c)
	    : "rcx", "r11", "memory", "cc");
	return failed ? -ret : ret;
}

/* Six arguments: the fourth to sixth in r10, r8, r9. */
static long
sys6(long num, long a, long b, long c, long d, long e, long f)
{
	long ret;
	unsigned char failed;
	register long r10 __asm__("r10") = d;
	register long r8 __asm__("r8") = e;
	register long r9 __asm__("r9") = f;

	__asm__ volatile("syscall; setc %1"
	    : "=a"(ret), "=r"(failed)
	    : "a"(num), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
	    : "rcx", "r11", "memory", "cc");
	return failed ? -ret : ret;
}

/* The same with a fourth argument, which the syscall convention passes in r10. */
static long
sys4(long num, long a, long b, long c, long d)
{
	long ret;
	unsigned char failed;
	register long r10 __asm__("r10") = d;

	__asm__ volatile("syscall; setc %1"
	    : "=a"(ret), "=r"(failed)
	    : "a"(num), "D"(a), "S"(b), "d"(c), "r"(r10)
	    : "rcx", "r11", "memory", "cc");
	return failed ? -ret : ret;
}

static int console = -1;
static char nonce[NONCE_MAX + 1];

static size_t
length(const char *s)
{
	size_t n = 0;

	while (s[n] != '\0')
		n++;
	return n;
}

static void
put(const char *s)
{
	if (console >= 0)
		sys3(SYS_write, console, (long)s, (long)length(s));
}

static void
put_num(long v)
{
	char buf[24];
	int i = sizeof(buf) - 1;
	int neg = v < 0;
	unsigned long u = neg ? (unsigned long)-v : (unsigned long)v;

	buf[i] = '\0';
	do {
		buf[--i] = (char)('0' + u % 10);
		u /= 10;
	} while (u != 0 && i > 1);
	if (neg)
		buf[--i] = '-';
	put(buf + i);
}

/* Ends a marker line: the nonce, when the host gave one. */
static void
end_marker(void)
{
	if (nonce[0] != '\0') {
		put(" nonce=");
		put(nonce);
	}
	put("\n");
}

static void
marker(const char *what)
{
	put("### bsdkm-ci: ");
	put(what);
	end_marker();
}

/* Reads bsdkm_ci.nonce (lowercase hex only) and removes it from the kernel environment. */
static void
take_nonce(void)
{
	char buf[NONCE_MAX + 1];
	char left[4] = {0, 0, 0, 0};
	long n, i;

	for (i = 0; i <= NONCE_MAX; i++)
		buf[i] = '\0';
	n = sys4(SYS_kenv, KENV_GET, (long)"bsdkm_ci.nonce", (long)buf, NONCE_MAX);
	sys4(SYS_kenv, KENV_UNSET, (long)"bsdkm_ci.nonce", 0, 0);
	buf[NONCE_MAX] = '\0';
	if (sys4(SYS_kenv, KENV_GET, (long)"bsdkm_ci.nonce", (long)left, sizeof(left)) >= 0 && left[0] != '\0')
		put("### bsdkm-ci: the nonce is still in the kernel environment\n");
	if (n < 0 || buf[0] == '\0') {
		/* The host then takes no marker of this boot: say why on the console. */
		put("### bsdkm-ci: no nonce (kenv ");
		put_num(n);
		put(")\n");
		return;
	}
	for (i = 0; i < NONCE_MAX && buf[i] != '\0'; i++) {
		if (!((buf[i] >= '0' && buf[i] <= '9') || (buf[i] >= 'a' && buf[i] <= 'f'))) {
			put("### bsdkm-ci: no nonce (not hex)\n");
			return;
		}
	}
	for (i = 0; i <= NONCE_MAX; i++)
		nonce[i] = buf[i];
}

/* "### bsdkm-ci: <what> rc=0" or "... rc=-1 errno=N". */
static void
result(const char *what, long ret)
{
	put("### bsdkm-ci: ");
	put(what);
	if (ret < 0) {
		put(" rc=-1 errno=");
		put_num(-ret);
	} else {
		put(" rc=0");
	}
	end_marker();
}

static void
stat_line(long fileid)
{
	struct kld_file_stat st;
	long ret;
	char *p = (char *)&st;
	size_t i;

	for (i = 0; i < sizeof(st); i++)
		p[i] = 0;
	st.version = sizeof(st);
	ret = sys3(SYS_kldstat, fileid, (long)&st, 0);
	if (ret < 0) {
		result("kldstat", ret);
		return;
	}
	put("### bsdkm-ci: kldstat id=");
	put_num(st.id);
	put(" refs=");
	put_num(st.refs);
	put(" size=");
	put_num((long)st.size);
	put(" name=");
	put(st.name);
	end_marker();
}

/* ---- counted fixed work through /dev/crypto ---- */

#define COUNT_MAX_SIZES 16
#define COUNT_MAX_SIZE 65536
#define ANCHOR_MAX 128
#define KLDSYM_LOOKUP 1
#define PROT_READ 1
#define PROT_WRITE 2
#define PROT_EXEC 4
#define MAP_PRIVATE 0x0002
#define MAP_ANON 0x1000
#define PAGE 4096

/* opencrypto's /dev/crypto interface (sys/opencrypto/cryptodev.h), amd64 layout. */
#define CRYPTO_AES_CBC 11
#define CRYPTO_AES_NIST_GCM_16 25
#define COP_ENCRYPT 1

struct session2_op {
	unsigned int cipher;
	unsigned int mac;
	unsigned int keylen;
	const void *key;
	int mackeylen;
	const void *mackey;
	unsigned int ses;
	int crid;
	int ivlen;
	int maclen;
	int pad[2];
};

struct crypt_op {
	unsigned int ses;
	unsigned short op;
	unsigned short flags;
	unsigned int len;
	const void *src;
	void *dst;
	void *mac;
	const void *iv;
};

struct crypt_aead {
	unsigned int ses;
	unsigned short op;
	unsigned short flags;
	unsigned int len;
	unsigned int aadlen;
	unsigned int ivlen;
	const void *src;
	void *dst;
	const void *aad;
	void *tag;
	const void *iv;
};

struct crypt_find_op {
	int crid;
	char name[32];
};

struct kld_sym_lookup {
	int version;
	const char *symname;
	unsigned long symvalue;
	size_t symsize;
};

/* The sizes the ioctl numbers encode: a layout that drifted from the kernel's fails here. */
_Static_assert(sizeof(struct session2_op) == 64, "session2_op layout");
_Static_assert(sizeof(struct crypt_op) == 48, "crypt_op layout");
_Static_assert(sizeof(struct crypt_aead) == 64, "crypt_aead layout");
_Static_assert(sizeof(struct crypt_find_op) == 36, "crypt_find_op layout");
_Static_assert(sizeof(struct kld_sym_lookup) == 32, "kld_sym_lookup layout");

#define IOC_OUT 0x40000000UL
#define IOC_IN 0x80000000UL
#define IOCPARM_MASK 0x1fffUL
#define IOC(dir, n, len) ((dir) | (((unsigned long)(len) & IOCPARM_MASK) << 16) | ('c' << 8) | (n))
#define CIOCFSESSION IOC(IOC_IN, 102, sizeof(unsigned int))
#define CIOCCRYPT IOC(IOC_IN | IOC_OUT, 103, sizeof(struct crypt_op))
#define CIOCGSESSION2 IOC(IOC_IN | IOC_OUT, 106, sizeof(struct session2_op))
#define CIOCFINDDEV IOC(IOC_IN | IOC_OUT, 108, sizeof(struct crypt_find_op))
#define CIOCCRYPTAEAD IOC(IOC_IN | IOC_OUT, 109, sizeof(struct crypt_aead))

/* The items in the host's order (perf/kernel_counts.py FREEBSD_ALGS): index = alg * nsizes + size. */
static const struct count_alg {
	const char *name;
	unsigned int cipher;
	int ivlen;
	int maclen;
} count_algs[] = {
	{"aes-gcm", CRYPTO_AES_NIST_GCM_16, 12, 16},
	{"aes-cbc", CRYPTO_AES_CBC, 16, 0},
};

static long count_bytes;
static long count_sizes[COUNT_MAX_SIZES];
static int count_nsizes;
static char count_anchor[ANCHOR_MAX + 1];
static unsigned long count_anchor_off;
static long count_text_off = -1; /* -1: not given */
static unsigned long nonce_half[2];

static unsigned char work_buf[COUNT_MAX_SIZE];
static unsigned char work_tag[16];
static unsigned char work_iv[16];
static const unsigned char work_key[16] = {
	0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f};

static void
put_hex(unsigned long v)
{
	char buf[20];
	int i = sizeof(buf) - 1;

	buf[i] = '\0';
	do {
		buf[--i] = "0123456789abcdef"[v & 15];
		v >>= 4;
	} while (v != 0 && i > 0);
	put(buf + i);
}

/* A decimal or (hex != 0) hexadecimal number ending at '\0' or ','; -1 when malformed. */
static long
parse_num(const char *s, const char **end, int hex)
{
	long v = 0;
	int digits = 0;

	for (;; s++, digits++) {
		int d = *s >= '0' && *s <= '9' ? *s - '0' :
		    hex && *s >= 'a' && *s <= 'f' ? *s - 'a' + 10 : -1;
		if (d < 0)
			break;
		if (v > 0x7ffffffffffL)
			return -1;
		v = v * (hex ? 16 : 10) + d;
	}
	if (end != 0)
		*end = s;
	return digits ? v : -1;
}

static long
kenv_get(const char *name, char *buf, long len)
{
	long i, n;

	for (i = 0; i < len; i++)
		buf[i] = '\0';
	n = sys4(SYS_kenv, KENV_GET, (long)name, (long)buf, len - 1);
	buf[len - 1] = '\0';
	return n;
}

/*
 * The counted work the host asked for, read before the module loads (the module could
 * change the environment after). Nothing asked: count_bytes stays 0 and nothing is counted.
 */
static void
take_count_request(void)
{
	char buf[ANCHOR_MAX + 1];
	const char *p;
	long v;
	int i;

	if (kenv_get("bsdkm_ci.count_bytes", buf, sizeof(buf)) < 0)
		return;
	v = parse_num(buf, &p, 0);
	if (v <= 0 || *p != '\0') {
		put("crypto-count: error reason=bad-request what=bytes\n");
		return;
	}
	if (kenv_get("bsdkm_ci.count_sizes", buf, sizeof(buf)) < 0) {
		put("crypto-count: error reason=bad-request what=sizes\n");
		return;
	}
	for (p = buf, count_nsizes = 0; *p != '\0' && count_nsizes < COUNT_MAX_SIZES; count_nsizes++) {
		long sz = parse_num(p, &p, 0);
		if (sz < 16 || sz > COUNT_MAX_SIZE || sz % 16 || (*p != ',' && *p != '\0')) {
			put("crypto-count: error reason=bad-request what=sizes\n");
			count_nsizes = 0;
			return;
		}
		count_sizes[count_nsizes] = sz;
		if (*p == ',')
			p++;
	}
	if (kenv_get("bsdkm_ci.count_text_off", buf, sizeof(buf)) >= 0 &&
	    ((count_text_off = parse_num(buf, &p, 1)) < 0 || *p != '\0')) {
		put("crypto-count: error reason=bad-request what=text_off\n");
		count_nsizes = 0;
		return;
	}
	if (kenv_get("bsdkm_ci.count_anchor", count_anchor, sizeof(count_anchor)) < 0) {
		count_anchor[0] = '\0';
	} else if (kenv_get("bsdkm_ci.count_anchor_off", buf, sizeof(buf)) < 0 ||
	    (long)(count_anchor_off = (unsigned long)parse_num(buf, &p, 1)) < 0 || *p != '\0') {
		put("crypto-count: error reason=bad-request what=anchor\n");
		count_nsizes = 0;
		return;
	}
	if (count_text_off < 0 && count_anchor[0] == '\0') {
		put("crypto-count: error reason=bad-request what=base\n");
		count_nsizes = 0;
		return;
	}
	/* The signals carry the nonce as the plugin reads it: the first 16 digits the high half. */
	nonce_half[0] = nonce_half[1] = 0;
	for (i = 0; i < 32; i++) {
		char c = nonce[i];
		int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
		if (d < 0) {
			put("crypto-count: error reason=no-nonce\n");
			count_nsizes = 0;
			return;
		}
		nonce_half[i / 16] = (nonce_half[i / 16] << 4) | (unsigned long)d;
	}
	count_bytes = count_nsizes ? v : 0;
}

static void
put_movabs(unsigned char *p, unsigned long v)
{
	int i;

	p[0] = 0x49; /* REX.W+B */
	p[1] = 0xbb; /* mov imm64 -> r11 */
	for (i = 0; i < 8; i++)
		p[2 + i] = (unsigned char)(v >> (8 * i));
}

/* One signal for the counting plugin; 0, or -errno when no executable page could be had. */
static long
count_signal(char kind, unsigned long base, unsigned long index)
{
	unsigned long imm[4] = {nonce_half[0], nonce_half[1], base, index};
	unsigned char *page;
	long ret;
	int i;

	ret = sys6(SYS_mmap, 0, PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANON, -1, 0);
	if (ret < 0)
		return ret;
	page = (unsigned char *)ret;
	page[0] = 0x0f; /* nopl disp32(%rax): the marker the plugin looks for */
	page[1] = 0x1f;
	page[2] = 0x80;
	page[3] = 'B';
	page[4] = 'K';
	page[5] = 'C';
	page[6] = (unsigned char)kind;
	for (i = 0; i < 4; i++)
		put_movabs(page + 7 + 10 * i, imm[i]);
	page[47] = 0xc3; /* ret */
	ret = sys3(SYS_mprotect, (long)page, PAGE, PROT_READ | PROT_EXEC);
	if (ret >= 0)
		((void (*)(void))(void *)page)(); /* r11 is caller-saved: the compiler expects it clobbered */
	sys3(SYS_munmap, (long)page, PAGE, 0);
	return ret < 0 ? ret : 0;
}

/*
 * One encryption in place: no separate output buffer for the driver to support. The input
 * changes from one operation to the next; AES and GHASH execute the same instructions
 * whatever the data.
 */
static long
count_op(int fd, const struct count_alg *alg, unsigned int ses, long size)
{
	if (alg->maclen) {
		struct crypt_aead op = {ses, COP_ENCRYPT, 0, (unsigned int)size, 0, (unsigned int)alg->ivlen,
		    work_buf, work_buf, 0, work_tag, work_iv};
		return sys3(SYS_ioctl, fd, (long)CIOCCRYPTAEAD, (long)&op);
	} else {
		struct crypt_op op = {ses, COP_ENCRYPT, 0, (unsigned int)size, work_buf, work_buf, 0, work_iv};
		return sys3(SYS_ioctl, fd, (long)CIOCCRYPT, (long)&op);
	}
}

static void
count_line(const char *what, long index, const char *alg)
{
	put("crypto-count: ");
	put(what);
	put(" index=");
	put_num(index);
	put(" alg=");
	put(alg);
}

static void
count_error(const char *reason, long err)
{
	put("crypto-count: error reason=");
	put(reason);
	put(" errno=");
	put_num(-err);
	put("\n");
}

/*
 * kern.crypto.allow_soft=0, the kernel's default, stated: /dev/crypto then refuses every driver
 * that registered CRYPTOCAP_F_SOFTWARE alone (cryptosoft0, aesni0, ossl0), while a session bound
 * to wolfSSL's crid is accepted, because its driver registers CRYPTOCAP_F_HARDWARE as well
 * (checkforsoftware() in sys/opencrypto/cryptodev.c reads the driver's capabilities). The same
 * value kmod/freebsd/offload.sh sets on a worker (docs/offload.md).
 */
static void
allow_soft(void)
{
	int zero = 0;

	if (sys6(SYS___sysctlbyname, (long)"kern.crypto.allow_soft", 22, 0, 0, (long)&zero, sizeof(zero)) < 0)
		sys6(SYS___sysctlbyname, (long)"kern.cryptodevallowsoft", 23, 0, 0, (long)&zero, sizeof(zero));
}

/* The module's .text base, or 0 (the reason printed). */
static unsigned long
text_base(long fileid)
{
	struct kld_sym_lookup sym = {sizeof(struct kld_sym_lookup), count_anchor, 0, 0};
	struct kld_file_stat st;
	unsigned long base = 0;
	long ret;
	size_t i;

	if (count_text_off >= 0) {
		for (i = 0; i < sizeof(st); i++)
			((char *)&st)[i] = 0;
		st.version = sizeof(st);
		ret = sys3(SYS_kldstat, fileid, (long)&st, 0);
		if (ret < 0 || st.address == 0) {
			count_error("kldstat", ret < 0 ? ret : 0);
			return 0;
		}
		base = (unsigned long)st.address + (unsigned long)count_text_off;
	}
	if (count_anchor[0] == '\0')
		return base;
	ret = sys3(SYS_kldsym, fileid, KLDSYM_LOOKUP, (long)&sym);
	if (ret < 0 || sym.symvalue < count_anchor_off) {
		if (base != 0) /* a kernel whose kldsym sees no local symbols: the load address stands */
			return base;
		count_error("kldsym", ret < 0 ? ret : 0);
		return 0;
	}
	if (base != 0 && base != sym.symvalue - count_anchor_off) {
		put("crypto-count: error reason=base-mismatch kldstat=0x");
		put_hex(base);
		put(" kldsym=0x");
		put_hex(sym.symvalue - count_anchor_off);
		put("\n");
		return 0;
	}
	return sym.symvalue - count_anchor_off;
}

/* The module's whole mapping as the plugin's range 1: 0, or the reason printed. */
static int
declare_mapping(long fileid)
{
	struct kld_file_stat st;
	long ret;
	size_t i;

	for (i = 0; i < sizeof(st); i++)
		((char *)&st)[i] = 0;
	st.version = sizeof(st);
	ret = sys3(SYS_kldstat, fileid, (long)&st, 0);
	if (ret < 0 || st.address == 0 || st.size == 0 || st.size >= (1UL << 48)) {
		count_error("kldstat", ret < 0 ? ret : 0);
		return -1;
	}
	ret = count_signal('R', (unsigned long)st.address, (1UL << 48) | (unsigned long)st.size);
	if (ret < 0) {
		count_error("signal", ret);
		return -1;
	}
	put("crypto-count: range number=1 name=module base=0x");
	put_hex((unsigned long)st.address);
	put(" size=");
	put_num((long)st.size);
	put("\n");
	return 0;
}

static void
count_work(long fileid)
{
	struct crypt_find_op find;
	unsigned long base;
	long fd, ret;
	unsigned int a;
	int s, i;

	if (count_bytes <= 0)
		return;
	base = text_base(fileid);
	if (base == 0)
		return;
	put("crypto-count: begin version=1 bytes=");
	put_num(count_bytes);
	put(" sizes=");
	for (s = 0; s < count_nsizes; s++) {
		if (s)
			put(",");
		put_num(count_sizes[s]);
	}
	put(" base=0x");
	put_hex(base);
	put("\n");
	if (declare_mapping(fileid) != 0)
		return;
	/* The kernel's own cryptodev.ko; EEXIST: the kernel has device cryptodev built in. */
	ret = sys3(SYS_kldload, (long)CRYPTODEV_PATH, 0, 0);
	put("crypto-count: cryptodev ");
	put(ret >= 0 ? "loaded" : ret == -EEXIST ? "present" : "not-loaded errno=");
	if (ret < 0 && ret != -EEXIST)
		put_num(-ret);
	put("\n");
	allow_soft();
	fd = sys3(SYS_open, (long)"/dev/crypto", O_RDWR, 0);
	if (fd < 0) {
		/* No /dev/crypto: say why, the module's load when that failed. */
		if (ret < 0 && ret != -EEXIST)
			count_error("cryptodev-kldload", ret);
		else
			count_error("open-dev-crypto", fd);
		return;
	}
	for (i = 0; i < (int)sizeof(find); i++)
		((char *)&find)[i] = 0;
	find.crid = -1;
	for (i = 0; "libwolf"[i] != '\0'; i++)
		find.name[i] = "libwolf"[i];
	ret = sys3(SYS_ioctl, fd, (long)CIOCFINDDEV, (long)&find);
	if (ret < 0) {
		count_error("no-wolfssl-driver", ret);
		sys3(SYS_close, fd, 0, 0);
		return;
	}
	for (a = 0; a < sizeof(count_algs) / sizeof(count_algs[0]); a++) {
		const struct count_alg *alg = &count_algs[a];
		/* IV and tag lengths 0: the transform's own (12 and 16 for GCM, 16 for CBC). */
		struct session2_op sess = {alg->cipher, 0, sizeof(work_key), work_key, 0, 0, 0, find.crid,
		    0, 0, {0, 0}};
		long sret = sys3(SYS_ioctl, fd, (long)CIOCGSESSION2, (long)&sess);

		for (s = 0; s < count_nsizes; s++) {
			long index = (long)a * count_nsizes + s;
			long size = count_sizes[s];
			long ops = count_bytes / size > 0 ? count_bytes / size : 1;
			long done = 0;

			if (sret < 0 || (ret = count_op(fd, alg, sess.ses, size)) < 0) {
				/* No session, or the warm-up failed: nothing of this item ran counted. */
				count_line("skip", index, alg->name);
				put(sret < 0 ? " reason=session errno=" : " reason=warm-up errno=");
				put_num(-(sret < 0 ? sret : ret));
				put("\n");
				continue;
			}
			ret = count_signal('S', base, (unsigned long)index);
			if (ret < 0) {
				count_error("signal", ret);
				break;
			}
			while (done < ops && (ret = count_op(fd, alg, sess.ses, size)) >= 0)
				done++;
			count_signal('E', base, (unsigned long)index);
			count_line("item", index, alg->name);
			put(" driver=libwolf bytes=");
			put_num(size);
			put(" ops=");
			put_num(done);
			put(" rc=");
			put_num(ret < 0 ? ret : 0);
			put("\n");
		}
		if (sret >= 0)
			sys3(SYS_ioctl, fd, (long)CIOCFSESSION, (long)&sess.ses);
	}
	sys3(SYS_close, fd, 0, 0);
	put("crypto-count: end\n");
}

static void
finish(void)
{
	marker("poweroff");
	sys3(SYS_reboot, RB_NOSYNC, 0, 0);
	sys3(SYS_exit, 0, 0, 0);
	for (;;)
		;
}

void
_start(void)
{
	long fileid, ret;

	console = (int)sys3(SYS_open, (long)"/dev/console", O_RDWR, 0);
	take_nonce();
	take_count_request();
	marker("init begin");
	marker("module path=" MODULE_PATH " name=libwolfssl");
	marker("load begin");
	fileid = sys3(SYS_kldload, (long)MODULE_PATH, 0, 0);
	result("load", fileid);
	if (fileid < 0)
		finish();
	ret = sys3(SYS_kldfind, (long)MODULE_FILE, 0, 0);
	if (ret >= 0)
		stat_line(ret);
	else
		result("kldfind", ret);
	count_work(fileid);
	marker("unload begin");
	ret = sys3(SYS_kldunload, fileid, 0, 0);
	result("unload", ret);
	if (ret >= 0) {
		ret = sys3(SYS_kldfind, (long)MODULE_FILE, 0, 0);
		marker(ret >= 0 ? "still listed after unload" : "not listed after unload");
	}
	finish();
}
