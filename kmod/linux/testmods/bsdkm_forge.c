// SPDX-License-Identifier: GPL-2.0
/*
 * Init prints what the harness prints (its markers, the loader's success line, a module-list
 * line) and then fails with -EINVAL: the harness must still see a failed load.
 */
#include <linux/errno.h>
#include <linux/init.h>
#include <linux/module.h>

static int __init bsdkm_forge_init(void)
{
	pr_err("### bsdkm-ci: load rc=0 uptime=1.00\n");
	pr_err("bsdkm-modload: load /lib/modules/bsdkm/bsdkm_forge.ko: ok\n");
	pr_info("### bsdkm-ci: load rc=0\n### bsdkm-ci: modules begin\nbsdkm_forge 16384 0 - Live 0x0\n");
	pr_info("### bsdkm-ci: unload rc=0\n### bsdkm-ci: poweroff\n");
	return -EINVAL;
}

module_init(bsdkm_forge_init);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("bsdkm-ci harness check: init forges the harness's lines, then fails");
