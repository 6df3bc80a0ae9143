/*
 * The trampolines.
 *
 * Every traced function F has a 16-byte stub in the padding just before it
 * (trace_stub_init() in site.c writes it once, at start-up):
 *
 *	stub + 0:  call trace_entry_tramp	pushes stub + 5
 *	stub + 5:  call F + 5			F's body, returning to stub + 10
 *	stub + 10: jmp  trace_return_tramp
 *	stub + 15: int3
 *
 * and a patched site (F + 0, just after the stub) is "jmp stub". So on
 * arrival here 0(%rsp) is stub + 5 and 8(%rsp) F's own return address.
 *
 * Why a stub: every branch stays predictable. A return address simply
 * swapped for a trampoline makes F's ret miss the return-stack buffer, and
 * the jump back to the caller is an indirect one that misses as soon as the
 * function has more than one caller (~10 ns each on our machines). Here the
 * calls and returns pair up: the site's jmp pushes nothing; the stub's call
 * to us and our ret pair up; the stub's call of F's body and F's ret pair
 * up (F returns into its stub, as predicted); and the ret that ends
 * trace_return_tramp pops the entry that F's caller pushed.
 *
 * The argument registers (and rax: the vector count of a variadic call,
 * r10: the static chain) are saved; the hooks are built general-regs-only,
 * so the vector registers are saved only around the slow path, which may
 * call into libc. The stack is 16-byte aligned at each call.
 *
 * trace_return_tramp is where a traced function's stub goes once F
 * returned. It keeps the return registers: rax and rdx on the stack; xmm0,
 * xmm1, st0 and st1 because the exit hook and the tracers' exit callbacks
 * are general-regs-only and never touch them. It asks the exit hook for
 * the real return address and returns there. The stubs and this trampoline
 * stay valid for the life of the process: a thread may return through them
 * long after tracing stopped.
 */
#include "trace_asm.h"

	.text

/*
 * The argument registers, rax (a variadic call's vector count) and r10
 * (the static chain), around a hook: 64 bytes, so that what was 0(%rsp)
 * on arrival is 64(%rsp). restore_args keeps the flags (pops only).
 */
.macro save_args
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
.endm

.macro restore_args
	popq	%r10
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
.endm

/*
 * The slow paths call C, which may use the vector argument registers the
 * traced function's caller passed: keep xmm0-7 below the saved ones.
 */
.macro save_xmm
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
.endm

.macro restore_xmm
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
.endm

	.globl	trace_entry_tramp
	.type	trace_entry_tramp, @function
	.p2align 4
trace_entry_tramp:
	.cfi_startproc
	save_args
	movq	64(%rsp), %rdi		/* stub + 5 */
	leaq	72(%rsp), %rsi		/* where F's return address is */
	call	trace_entry_hook@PLT
	cmpl	$TRACE_HOOK_UNTRACED, %eax
	ja	3f			/* TRACE_HOOK_SLOW */
	/* pops keep the flags of that compare */
1:	restore_args
	je	2f
	/*
	 * TRACE_HOOK_TRACED: the hook kept F's return address on the shadow
	 * stack and put stub + 5 in its place. Drop our own return address
	 * and return to stub + 5 (which the return-stack buffer predicts):
	 * it calls F's body with the stack as F's caller left it.
	 */
	.cfi_remember_state
	leaq	8(%rsp), %rsp
	.cfi_adjust_cfa_offset -8
	ret
	.cfi_restore_state
2:	/* TRACE_HOOK_UNTRACED (rare): straight to F's body, skipping the stub */
	addq	$TRACE_STUB_SIZE, (%rsp)
	ret
3:	/* slow path: this thread has no buffer for this session yet */
	.cfi_adjust_cfa_offset 64
	save_xmm
	movq	192(%rsp), %rdi
	leaq	200(%rsp), %rsi
	call	trace_entry_slow@PLT
	restore_xmm
	cmpl	$TRACE_HOOK_UNTRACED, %eax
	jmp	1b
	.cfi_endproc
	.size	trace_entry_tramp, .-trace_entry_tramp

	.globl	trace_return_tramp
	.type	trace_return_tramp, @function
	.p2align 4
trace_return_tramp:
	.cfi_startproc
	/* F returned into its stub, which jumped here: rsp is the caller's (16n) */
	subq	$8, %rsp		/* F's slot again: the real return address */
	.cfi_adjust_cfa_offset 8
	pushq	%rax
	.cfi_adjust_cfa_offset 8
	pushq	%rdx
	.cfi_adjust_cfa_offset 8
	leaq	24(%rsp), %rdi		/* rsp on arrival */
	subq	$8, %rsp		/* 16-byte aligned */
	.cfi_adjust_cfa_offset 8
	call	trace_exit_hook@PLT	/* general-regs-only: xmm0, xmm1, st0 stay */
	movq	%rax, 24(%rsp)
	addq	$8, %rsp
	.cfi_adjust_cfa_offset -8
	popq	%rdx
	.cfi_adjust_cfa_offset -8
	popq	%rax
	.cfi_adjust_cfa_offset -8
	/* pops the return-stack-buffer entry of the caller's call: predicted */
	ret
	.cfi_endproc
	.size	trace_return_tramp, .-trace_return_tramp

/*
 * trace_func_tramp: what an entry-only site calls ("call trace_func_tramp"
 * in place of the NOP, when only entry-only tracers want the function).
 * Nothing is hijacked: the call and our ret pair up, so both stay
 * predicted, and F runs on. On arrival 0(%rsp) is F + 5 and 8(%rsp) F's
 * return address (its caller). Registers as in trace_entry_tramp.
 */
	.globl	trace_func_tramp
	.type	trace_func_tramp, @function
	.p2align 4
trace_func_tramp:
	.cfi_startproc
	save_args
	movq	64(%rsp), %rdi		/* F + 5 */
	movq	72(%rsp), %rsi		/* F's caller */
	call	trace_func_hook@PLT
	cmpl	$TRACE_HOOK_UNTRACED, %eax
	ja	3f			/* TRACE_HOOK_SLOW */
1:	restore_args
	ret
3:	/* slow path: this thread has no buffer for this session yet */
	.cfi_adjust_cfa_offset 64
	save_xmm
	movq	192(%rsp), %rdi
	movq	200(%rsp), %rsi
	call	trace_func_slow@PLT
	restore_xmm
	jmp	1b
	.cfi_endproc
	.size	trace_func_tramp, .-trace_func_tramp

/*
 * trace_sample_tramp: what a site in the sample form calls ("call
 * trace_sample_tramp": the graph tracer's request mode). On arrival 0(%rsp)
 * is F + 5 and 8(%rsp) F's return address. A thread that serves no request
 * the mode chose goes straight back to F's body: a call and a return that
 * pair up (predicted) around one test of a thread-local word, all that
 * the other requests' calls pay. Otherwise the hook records the call as
 * trace_entry_tramp's would and swaps F's return address for
 * trace_return_tramp (no stub: the return mispredicts, which only the
 * requests chosen pay). Registers as in trace_entry_tramp; this file is
 * linked into executables only, so the word is reached at a fixed offset
 * from %fs (local-exec TLS).
 */
	.globl	trace_sample_tramp
	.type	trace_sample_tramp, @function
	.p2align 4
trace_sample_tramp:
	.cfi_startproc
	cmpl	$0, %fs:trace_req_unsampled@tpoff
	jne	4f
	save_args
	movq	64(%rsp), %rdi		/* F + 5 */
	leaq	72(%rsp), %rsi		/* where F's return address is */
	leaq	trace_return_tramp(%rip), %rdx	/* what goes there */
	call	trace_sample_hook@PLT
	cmpl	$TRACE_HOOK_UNTRACED, %eax
	ja	3f			/* TRACE_HOOK_SLOW */
1:	restore_args
4:	ret				/* to F + 5, traced or not */
3:	/* slow path: this thread has no buffer for this session yet */
	.cfi_adjust_cfa_offset 64
	save_xmm
	movq	192(%rsp), %rdi
	leaq	200(%rsp), %rsi
	leaq	trace_return_tramp(%rip), %rdx
	call	trace_sample_slow@PLT
	restore_xmm
	jmp	1b
	.cfi_endproc
	.size	trace_sample_tramp, .-trace_sample_tramp

	.section .note.GNU-stack, "", @progbits
