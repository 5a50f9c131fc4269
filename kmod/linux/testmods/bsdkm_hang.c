// SPDX-License-Identifier: GPL-2.0
/* Init never returns: the harness must notice and still collect the log. */
#include <linux/delay.h>
#include <linux/init.h>
#include <linux/module.h>

static int __init bsdkm_hang_init(void)
{
	pr_err("bsdkm_hang: init sleeping forever\n");
	for (;;)
		msleep(1000);
	return 0;
}

module_init(bsdkm_hang_init);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("bsdkm-ci harness check: init hangs");
