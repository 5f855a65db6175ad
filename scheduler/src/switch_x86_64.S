// Context switch for x86-64 (System V ABI).
//
//   void goro_switch(void** save_sp, void* new_sp)
//
// Saves what the ABI says a callee must preserve — rbx, rbp, r12-r15, the MXCSR control
// bits and the x87 control word — on the current stack, stores the stack pointer in
// *save_sp, loads new_sp and restores the same set from there. Everything else is
// caller-saved, so the C++ code calling goro_switch has already spilled it. Not saved:
// the red zone below rsp (a call never leaves live data there) and fs (thread pointer:
// a goroutine that moves to another OS thread must see that thread's TLS).
//
//   goro_start
// The first "return address" on a new goroutine stack: calls r13(r12) with a 16-byte
// aligned stack. The callee never returns (a finished goroutine switches away).

        .text
        .globl  goro_switch
        .type   goro_switch, @function
        .p2align 4
goro_switch:
        .cfi_startproc
        pushq   %rbp
        pushq   %rbx
        pushq   %r12
        pushq   %r13
        pushq   %r14
        pushq   %r15
        subq    $8, %rsp
        stmxcsr (%rsp)
        fnstcw  4(%rsp)
        movq    %rsp, (%rdi)
        movq    %rsi, %rsp
        ldmxcsr (%rsp)
        fldcw   4(%rsp)
        addq    $8, %rsp
        popq    %r15
        popq    %r14
        popq    %r13
        popq    %r12
        popq    %rbx
        popq    %rbp
        ret
        .cfi_endproc
        .size   goro_switch, .-goro_switch

        .globl  goro_start
        .type   goro_start, @function
        .p2align 4
goro_start:
        .cfi_startproc
        .cfi_undefined rip
        movq    %r12, %rdi
        callq   *%r13
        ud2
        .cfi_endproc
        .size   goro_start, .-goro_start

        .section .note.GNU-stack,"",@progbits
