/*
 * The toy module: what the toy guest loads in the place of wolfSSL's. Its init prints a self-test
 * the way wolfCrypt's module does, so the core parsers read it; toy_sum is the work counted.
 */
void toy_print(const char *text); /* the guest's console, as a kernel's printf */

unsigned toy_sum(const unsigned char *buf, unsigned long len)
{
    unsigned sum = 0;
    while (len--)
        sum = sum * 31 + *buf++;
    return sum;
}

int toy_module_init(void)
{
    static const unsigned char known[3] = {1, 2, 3};
    if (toy_sum(known, 3) != (1 * 31 + 2) * 31 + 3) {
        toy_print("SUM      test failed!\n");
        return -1;
    }
    toy_print("SUM      test passed!\n");
    toy_print("info: wolfCrypt self-test passed.\n");
    return 0;
}

void toy_module_exit(void)
{
    toy_print("toy: module unloaded\n");
}
