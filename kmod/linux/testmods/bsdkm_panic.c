// SPDX-License-Identifier: GPL-2.0
/* Init panics the kernel: with panic=-1 and -no-reboot the VM ends at once. */
#include <linux/init.h>
#include <linux/kernel.h>
#include <linux/module.h>

static int __init bsdkm_panic_init(void)
{
	panic("bsdkm_panic: deliberate panic in module init");
	return 0;
}

module_init(bsdkm_panic_init);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("bsdkm-ci harness check: init panics");
