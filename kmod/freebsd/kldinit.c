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
 */

#define SYS_exit 1
#define SYS_write 4
#define SYS_open 5
#define SYS_reboot 55
#define SYS_kldload 304
#define SYS_kldunload 305
#define SYS_kldfind 306
#define SYS_kldstat 308
#define SYS_kenv 390

#define KENV_GET 0
#define KENV_UNSET 2
#define NONCE_MAX 64

#define O_RDWR 2
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
	marker("unload begin");
	ret = sys3(SYS_kldunload, fileid, 0, 0);
	result("unload", ret);
	if (ret >= 0) {
		ret = sys3(SYS_kldfind, (long)MODULE_FILE, 0, 0);
		marker(ret >= 0 ? "still listed after unload" : "not listed after unload");
	}
	finish();
}
