/*
 * The trampolines.
 *
 * A patched site is "call trace_entry_tramp" at the entry of a function, so
 * on arrival 0(%rsp) is the site + 5 and 8(%rsp) the function's own return
 * address. The argument registers (and rax: the vector count of a variadic
 * call, r10: the static chain) are saved; the hooks are built
 * general-regs-only, so the vector registers are saved only around the slow
 * path, which may call into libc. The stack is 16-byte aligned at each call.
 *
 * trace_return_tramp is where a traced function returns to once the hook
 * swapped its return address. It keeps the return registers: rax and rdx
 * on the stack; xmm0, xmm1, st0 and st1 because the exit hook and the
 * tracers' exit callbacks are general-regs-only and never touch them. It
 * asks the exit hook for the real return address and jumps there (r11 is
 * free at a return: caller-saved and no return value lives in it). It
 * stays valid for the life of the process: a thread may return through it
 * long after tracing stopped.
 */
	.text

	.globl	trace_entry_tramp
	.type	trace_entry_tramp, @function
	.p2align 4
trace_entry_tramp:
	.cfi_startproc
	pushq	%rax
	.cfi_adjust_cfa_offset 8
	pushq	%rdi
	.cfi_adjust_cfa_offset 8
	pushq	%rsi
	.cfi_adjust_cfa_offset 8
	pushq	%rdx
	.cfi_adjust_cfa_offset 8
	pushq	%rcx
	.cfi_adjust_cfa_offset 8
	pushq	%r8
	.cfi_adjust_cfa_offset 8
	pushq	%r9
	.cfi_adjust_cfa_offset 8
	pushq	%r10
	.cfi_adjust_cfa_offset 8
	movq	64(%rsp), %rdi		/* site + 5 */
	leaq	72(%rsp), %rsi		/* where the function's return address is */
	call	trace_entry_hook@PLT
	testl	%eax, %eax
	jnz	2f
1:	popq	%r10
	.cfi_adjust_cfa_offset -8
	popq	%r9
	.cfi_adjust_cfa_offset -8
	popq	%r8
	.cfi_adjust_cfa_offset -8
	popq	%rcx
	.cfi_adjust_cfa_offset -8
	popq	%rdx
	.cfi_adjust_cfa_offset -8
	popq	%rsi
	.cfi_adjust_cfa_offset -8
	popq	%rdi
	.cfi_adjust_cfa_offset -8
	popq	%rax
	.cfi_adjust_cfa_offset -8
	ret
2:	/* slow path: this thread has no buffer for this session yet */
	.cfi_adjust_cfa_offset 64
	subq	$128, %rsp
	.cfi_adjust_cfa_offset 128
	movdqu	%xmm0, 0(%rsp)
	movdqu	%xmm1, 16(%rsp)
	movdqu	%xmm2, 32(%rsp)
	movdqu	%xmm3, 48(%rsp)
	movdqu	%xmm4, 64(%rsp)
	movdqu	%xmm5, 80(%rsp)
	movdqu	%xmm6, 96(%rsp)
	movdqu	%xmm7, 112(%rsp)
	movq	192(%rsp), %rdi
	leaq	200(%rsp), %rsi
	call	trace_entry_slow@PLT
	movdqu	0(%rsp), %xmm0
	movdqu	16(%rsp), %xmm1
	movdqu	32(%rsp), %xmm2
	movdqu	48(%rsp), %xmm3
	movdqu	64(%rsp), %xmm4
	movdqu	80(%rsp), %xmm5
	movdqu	96(%rsp), %xmm6
	movdqu	112(%rsp), %xmm7
	addq	$128, %rsp
	.cfi_adjust_cfa_offset -128
	jmp	1b
	.cfi_endproc
	.size	trace_entry_tramp, .-trace_entry_tramp

	.globl	trace_return_tramp
	.type	trace_return_tramp, @function
	.p2align 4
trace_return_tramp:
	.cfi_startproc
	/* the traced function's ret popped our address: rsp is the caller's */
	pushq	%rax			/* rsp: 16n - 8 */
	.cfi_adjust_cfa_offset 8
	pushq	%rdx
	.cfi_adjust_cfa_offset 8
	subq	$8, %rsp		/* 16-byte aligned again */
	.cfi_adjust_cfa_offset 8
	leaq	24(%rsp), %rdi		/* rsp on arrival */
	call	trace_exit_hook@PLT	/* general-regs-only: xmm0, xmm1, st0 stay */
	movq	%rax, %r11		/* the real return address */
	addq	$8, %rsp
	.cfi_adjust_cfa_offset -8
	popq	%rdx
	.cfi_adjust_cfa_offset -8
	popq	%rax
	.cfi_adjust_cfa_offset -8
	/*
	 * jmp, not ret: the ret that brought us here consumed this frame's
	 * return-stack-buffer entry; another ret would pop the caller's and
	 * every outer return would be mispredicted.
	 */
	jmp	*%r11
	.cfi_endproc
	.size	trace_return_tramp, .-trace_return_tramp

	.section .note.GNU-stack, "", @progbits
