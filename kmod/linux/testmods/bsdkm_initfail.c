// SPDX-License-Identifier: GPL-2.0
/* Init fails with -ECANCELED, as libwolfssl.ko's does when its self-test fails. */
#include <linux/errno.h>
#include <linux/init.h>
#include <linux/module.h>

static int __init bsdkm_initfail_init(void)
{
	pr_err("bsdkm_initfail: failing init with -ECANCELED\n");
	return -ECANCELED;
}

module_init(bsdkm_initfail_init);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("bsdkm-ci harness check: init fails");
