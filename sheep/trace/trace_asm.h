/*
 * Constants shared by the trampolines (entry.S) and the C side of the
 * tracer core. Plain numbers only: this header is read by the assembler.
 */
#ifndef TRACE_ASM_H
#define TRACE_ASM_H

/*
 * Bytes of padding before each function (-fpatchable-function-entry=21,16:
 * 16 NOPs before the entry, 5 at it), where its stub lives. 16 keeps the
 * function itself 16-byte aligned.
 */
#define TRACE_STUB_SIZE 16
#define TRACE_STUB_CALL_RET 5  /* stub + 5: the stub's call of trace_entry_tramp returns here */
#define TRACE_STUB_BODY_RET 10 /* stub + 10: the traced function returns here */

/* what trace_entry_hook and trace_entry_slow tell trace_entry_tramp */
#define TRACE_HOOK_TRACED 0   /* shadow entry pushed: go through the stub */
#define TRACE_HOOK_UNTRACED 1 /* not traced: straight to the function's body */
#define TRACE_HOOK_SLOW 2     /* the thread needs its buffer first (entry hook only) */

#endif
