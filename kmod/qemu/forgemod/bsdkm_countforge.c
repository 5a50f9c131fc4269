// SPDX-License-Identifier: GPL-2.0
/*
 * Init executes the bsdkm-count plugin's start signal (the stub of kmod/linux/bsdkm_signal.h,
 * with a nonce of zeros) and then stops it, as PR code could: the plugin must count nothing.
 */
#include <linux/init.h>
#include <linux/module.h>

/* Exported, so that it sits in .text like the module code the plugin counts. */
noinline void bsdkm_countforge_signal(void)
{
	asm volatile(".byte 0x0f, 0x1f, 0x80, 'B', 'K', 'C', 'S'\n\t"
		     "movabs $0, %%r11\n\t"
		     "movabs $0, %%r11\n\t"
		     "movabs $0, %%r11\n\t"
		     "movabs $0, %%r11\n\t"
		     ".byte 0x0f, 0x1f, 0x80, 'B', 'K', 'C', 'E'\n\t"
		     "movabs $0, %%r11\n\t"
		     "movabs $0, %%r11\n\t"
		     "movabs $0, %%r11\n\t"
		     "movabs $0, %%r11\n\t"
		     : : : "r11");
}

EXPORT_SYMBOL_GPL(bsdkm_countforge_signal);

static int __init bsdkm_countforge_init(void)
{
	bsdkm_countforge_signal();
	return 0;
}

static void __exit bsdkm_countforge_exit(void)
{
}

module_init(bsdkm_countforge_init);
module_exit(bsdkm_countforge_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("bsdkm-ci check: executes the instruction counter's signal without the nonce");
