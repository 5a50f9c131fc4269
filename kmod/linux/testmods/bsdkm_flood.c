// SPDX-License-Identifier: GPL-2.0
/*
 * Init floods the console: it prints long lines for up to flood_s seconds (then returns 0).
 * The harness must stop the guest at its console cap and call the run a real failure.
 */
#include <linux/delay.h>
#include <linux/init.h>
#include <linux/jiffies.h>
#include <linux/module.h>
#include <linux/sched.h>

static int flood_s = 120;
module_param(flood_s, int, 0444);

static int __init bsdkm_flood_init(void)
{
	unsigned long until = jiffies + (unsigned long)flood_s * HZ;
	unsigned long n = 0;

	while (time_before(jiffies, until)) {
		pr_err("bsdkm_flood: %lu "
		       "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
		       "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\n",
		       n++);
		cond_resched();
	}
	return 0;
}

static void __exit bsdkm_flood_exit(void)
{
}

module_init(bsdkm_flood_init);
module_exit(bsdkm_flood_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("bsdkm-ci harness check: init floods the console");
