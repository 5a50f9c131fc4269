// SPDX-License-Identifier: GPL-2.0
/* Loads, says so, unloads: the harness's success path without wolfSSL. */
#include <linux/init.h>
#include <linux/module.h>

static int __init bsdkm_ok_init(void)
{
	pr_info("bsdkm_ok: init done\n");
	return 0;
}

static void __exit bsdkm_ok_exit(void)
{
	pr_info("bsdkm_ok: exit done\n");
}

module_init(bsdkm_ok_init);
module_exit(bsdkm_ok_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("bsdkm-ci harness check: loads and unloads");
