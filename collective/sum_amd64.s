#include "textflag.h"

// func addFloat32s(dst, src []float32)
// dst[i] += src[i] for i below the shorter length: 16 at a time in four
// SSE registers, then one at a time.
TEXT ·addFloat32s(SB), NOSPLIT, $0-48
	MOVQ dst_base+0(FP), DI
	MOVQ dst_len+8(FP), CX
	MOVQ src_base+24(FP), SI
	MOVQ src_len+32(FP), DX
	CMPQ DX, CX
	CMOVQLT DX, CX

loop32x16:
	CMPQ CX, $16
	JLT tail32
	MOVUPS (DI), X0
	MOVUPS 16(DI), X1
	MOVUPS 32(DI), X2
	MOVUPS 48(DI), X3
	MOVUPS (SI), X4
	MOVUPS 16(SI), X5
	MOVUPS 32(SI), X6
	MOVUPS 48(SI), X7
	ADDPS X4, X0
	ADDPS X5, X1
	ADDPS X6, X2
	ADDPS X7, X3
	MOVUPS X0, (DI)
	MOVUPS X1, 16(DI)
	MOVUPS X2, 32(DI)
	MOVUPS X3, 48(DI)
	ADDQ $64, DI
	ADDQ $64, SI
	SUBQ $16, CX
	JMP loop32x16

tail32:
	TESTQ CX, CX
	JEQ done32
	MOVSS (DI), X0
	ADDSS (SI), X0
	MOVSS X0, (DI)
	ADDQ $4, DI
	ADDQ $4, SI
	DECQ CX
	JMP tail32

done32:
	RET

// func addFloat64s(dst, src []float64)
// dst[i] += src[i] for i below the shorter length: 8 at a time, then one
// at a time.
TEXT ·addFloat64s(SB), NOSPLIT, $0-48
	MOVQ dst_base+0(FP), DI
	MOVQ dst_len+8(FP), CX
	MOVQ src_base+24(FP), SI
	MOVQ src_len+32(FP), DX
	CMPQ DX, CX
	CMOVQLT DX, CX

loop64x8:
	CMPQ CX, $8
	JLT tail64
	MOVUPD (DI), X0
	MOVUPD 16(DI), X1
	MOVUPD 32(DI), X2
	MOVUPD 48(DI), X3
	MOVUPD (SI), X4
	MOVUPD 16(SI), X5
	MOVUPD 32(SI), X6
	MOVUPD 48(SI), X7
	ADDPD X4, X0
	ADDPD X5, X1
	ADDPD X6, X2
	ADDPD X7, X3
	MOVUPD X0, (DI)
	MOVUPD X1, 16(DI)
	MOVUPD X2, 32(DI)
	MOVUPD X3, 48(DI)
	ADDQ $64, DI
	ADDQ $64, SI
	SUBQ $8, CX
	JMP loop64x8

tail64:
	TESTQ CX, CX
	JEQ done64
	MOVSD (DI), X0
	ADDSD (SI), X0
	MOVSD X0, (DI)
	ADDQ $8, DI
	ADDQ $8, SI
	DECQ CX
	JMP tail64

done64:
	RET
