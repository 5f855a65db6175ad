// Context switch for AArch64 (AAPCS64).
//
//   void goro_switch(void** save_sp, void* new_sp)
//
// Saves the callee-saved registers x19-x28, the frame pointer x29, the link register
// x30 and the low halves d8-d15 of v8-v15 (the only FP state AAPCS64 makes callee-saved),
// plus FPCR, in a 176-byte frame; stores sp in *save_sp, loads new_sp, restores, and
// returns through the restored x30. Not saved: x18 (on Linux an ordinary caller-saved
// temporary that GCC and Clang allocate, so the caller has already spilled it), FPSR
// (cumulative exception flags, which stay with the thread) and TPIDR_EL0 (thread
// pointer: a goroutine that moves to another OS thread must see that thread's TLS).
//
//   goro_start
// The first x30 of a new goroutine: calls x20(x19). The callee never returns.

        .text
        .globl  goro_switch
        .type   goro_switch, %function
        .p2align 4
goro_switch:
        sub     sp, sp, #176
        stp     x19, x20, [sp, #0]
        stp     x21, x22, [sp, #16]
        stp     x23, x24, [sp, #32]
        stp     x25, x26, [sp, #48]
        stp     x27, x28, [sp, #64]
        stp     x29, x30, [sp, #80]
        stp     d8,  d9,  [sp, #96]
        stp     d10, d11, [sp, #112]
        stp     d12, d13, [sp, #128]
        stp     d14, d15, [sp, #144]
        mrs     x9, fpcr
        str     x9, [sp, #160]
        mov     x9, sp
        str     x9, [x0]
        mov     sp, x1
        ldr     x9, [sp, #160]
        msr     fpcr, x9
        ldp     x19, x20, [sp, #0]
        ldp     x21, x22, [sp, #16]
        ldp     x23, x24, [sp, #32]
        ldp     x25, x26, [sp, #48]
        ldp     x27, x28, [sp, #64]
        ldp     x29, x30, [sp, #80]
        ldp     d8,  d9,  [sp, #96]
        ldp     d10, d11, [sp, #112]
        ldp     d12, d13, [sp, #128]
        ldp     d14, d15, [sp, #144]
        add     sp, sp, #176
        ret
        .size   goro_switch, .-goro_switch

        .globl  goro_start
        .type   goro_start, %function
        .p2align 4
goro_start:
        mov     x0, x19
        mov     x29, xzr
        blr     x20
        brk     #0
        .size   goro_start, .-goro_start

        .section .note.GNU-stack,"",%progbits
