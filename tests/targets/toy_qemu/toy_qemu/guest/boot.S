/*
 * The toy guest's start: a multiboot image (its header gives the load addresses, so QEMU's -kernel
 * needs no ELF) entered at 1 MiB in 32-bit protected mode. It maps the first GiB one to one with
 * 2 MiB pages, enters long mode and calls toy_main with the multiboot information.
 */
        .set MB_MAGIC, 0x1BADB002
        .set MB_FLAGS, 0x00010000

        .section .multiboot, "a"
        .align 4
mb_header:
        .long MB_MAGIC
        .long MB_FLAGS
        .long -(MB_MAGIC + MB_FLAGS)
        .long mb_header
        .long __image_start
        .long __load_end
        .long __bss_end
        .long start32

        .section .text32, "ax"
        .code32
        .globl start32
start32:
        cli
        movl %ebx, mb_info
        movl $__bss_start, %edi
        movl $__bss_end, %ecx
        subl %edi, %ecx
        shrl $2, %ecx
        xorl %eax, %eax
        rep stosl
        movl $pdpt + 3, pml4
        movl $pd + 3, pdpt
        xorl %ecx, %ecx
1:      movl %ecx, %eax
        shll $21, %eax
        orl $0x83, %eax
        movl %eax, pd(,%ecx,8)
        incl %ecx
        cmpl $512, %ecx
        jne 1b
        movl $pml4, %eax
        movl %eax, %cr3
        movl %cr4, %eax
        orl $0x20, %eax
        movl %eax, %cr4
        movl $0xC0000080, %ecx
        rdmsr
        orl $0x100, %eax
        wrmsr
        movl %cr0, %eax
        orl $0x80000001, %eax
        movl %eax, %cr0
        lgdt gdt_ptr
        ljmp $0x08, $start64

        .code64
start64:
        movw $0x10, %ax
        movw %ax, %ds
        movw %ax, %es
        movw %ax, %ss
        movq $stack_top, %rsp
        movl mb_info, %edi
        call toy_main
2:      hlt
        jmp 2b

        .section .rodata
        .align 8
gdt:
        .quad 0
        .quad 0x00AF9A000000FFFF
        .quad 0x00CF92000000FFFF
gdt_ptr:
        .word gdt_ptr - gdt - 1
        .long gdt

        .section .data
        .align 4
mb_info:
        .long 0

        .section .bss
        .align 4096
pml4:   .skip 4096
pdpt:   .skip 4096
pd:     .skip 4096
        .skip 16384
stack_top:

        .section .note.GNU-stack, "", @progbits
