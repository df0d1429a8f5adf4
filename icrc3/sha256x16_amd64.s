// A block's hash is about twenty SHA-256 compressions of short messages,
// each a chain of dependent rounds that SHA-NI runs one message at a time
// at its throughput limit. Sixteen independent messages fit the sixteen
// dword lanes of a ZMM register, so this compresses one 64-byte block of
// each of sixteen messages per pass with the FIPS 180-4 round functions in
// AVX-512 (each of Sigma0, Sigma1, Ch and Maj one VPTERNLOGD), which on CPUs
// with two 512-bit ports outruns SHA-NI on a batch of sums.

//go:build amd64 && !purego

#include "textflag.h"

// The round constants are those of the SHA-NI code (sha256_amd64.s),
// ·sha256K, where K[t] is at (t/4)*32+(t%4)*4; its byte-swap mask,
// ·sha256Flip, reverses the bytes of each dword of 16, as the big-endian
// message words need.

// sha256xPad is 64 zero bytes, 0x80 and 63 more: 64-r bytes into it is a
// block with the 0x80 at byte r.
DATA sha256xPad<>+64(SB)/1, $0x80
GLOBL sha256xPad<>(SB), RODATA|NOPTR, $128

// sha256xHalves is two VPERMT2D index vectors over sixteen qwords: the
// first picks the low dword of each, the second the high one.
DATA sha256xHalves<>+0(SB)/8, $0x0000000200000000
DATA sha256xHalves<>+8(SB)/8, $0x0000000600000004
DATA sha256xHalves<>+16(SB)/8, $0x0000000a00000008
DATA sha256xHalves<>+24(SB)/8, $0x0000000e0000000c
DATA sha256xHalves<>+32(SB)/8, $0x0000001200000010
DATA sha256xHalves<>+40(SB)/8, $0x0000001600000014
DATA sha256xHalves<>+48(SB)/8, $0x0000001a00000018
DATA sha256xHalves<>+56(SB)/8, $0x0000001e0000001c
DATA sha256xHalves<>+64(SB)/8, $0x0000000300000001
DATA sha256xHalves<>+72(SB)/8, $0x0000000700000005
DATA sha256xHalves<>+80(SB)/8, $0x0000000b00000009
DATA sha256xHalves<>+88(SB)/8, $0x0000000f0000000d
DATA sha256xHalves<>+96(SB)/8, $0x0000001300000011
DATA sha256xHalves<>+104(SB)/8, $0x0000001700000015
DATA sha256xHalves<>+112(SB)/8, $0x0000001b00000019
DATA sha256xHalves<>+120(SB)/8, $0x0000001f0000001d
GLOBL sha256xHalves<>(SB), RODATA|NOPTR, $128

// XOR3 leaves in t0 the xor of three shifts or rotations of x (Sigma0,
// Sigma1, sigma0 or sigma1), with t1 and t2 as scratch.
#define XOR3(x, op0, n0, op1, n1, op2, n2, t0, t1, t2) \
	op0        $n0, x, t0; \
	op1        $n1, x, t1; \
	op2        $n2, x, t2; \
	VPTERNLOGD $0x96, t2, t1, t0

// ROUND is round t on the lanes' working variables a..h, message word w
// (W[t]); it leaves T1+T2 in h and d+T1 in d, so the next round takes the
// registers rotated by one. Z24-Z28 are its scratch.
#define ROUND(a, b, c, d, e, f, g, h, w, t) \
	VPADDD.BCST ·sha256K+((t/4)*32+(t%4)*4)(SB), w, Z28; \
	VPADDD      Z28, h, h; \
	VMOVDQA32   e, Z27; \
	VPTERNLOGD  $0xca, g, f, Z27; \
	XOR3(e, VPRORD, 6, VPRORD, 11, VPRORD, 25, Z24, Z25, Z26); \
	VPADDD      Z27, h, h; \
	VPADDD      Z24, h, h; \
	VPADDD      h, d, d; \
	VMOVDQA32   a, Z27; \
	VPTERNLOGD  $0xe8, c, b, Z27; \
	XOR3(a, VPRORD, 2, VPRORD, 13, VPRORD, 22, Z24, Z25, Z26); \
	VPADDD      Z27, h, h; \
	VPADDD      Z24, h, h

// SCHED turns w0, holding W[t-16], into W[t] from w1 = W[t-15],
// w9 = W[t-7] and w14 = W[t-2]. Z29-Z31 are its scratch.
#define SCHED(w0, w1, w9, w14) \
	XOR3(w1, VPRORD, 7, VPRORD, 18, VPSRLD, 3, Z29, Z30, Z31); \
	VPADDD     Z29, w0, w0; \
	VPADDD     w9, w0, w0; \
	XOR3(w14, VPRORD, 17, VPRORD, 19, VPSRLD, 10, Z29, Z30, Z31); \
	VPADDD     Z29, w0, w0

// TRANS4 transposes, in each 128-bit lane, the 4x4 dwords of x0..x3 into
// y0..y3, with t0..t3 as scratch.
#define TRANS4(x0, x1, x2, x3, y0, y1, y2, y3, t0, t1, t2, t3) \
	VPUNPCKLDQ  x1, x0, t0; \
	VPUNPCKHDQ  x1, x0, t1; \
	VPUNPCKLDQ  x3, x2, t2; \
	VPUNPCKHDQ  x3, x2, t3; \
	VPUNPCKLQDQ t2, t0, y0; \
	VPUNPCKHQDQ t2, t0, y1; \
	VPUNPCKLQDQ t3, t1, y2; \
	VPUNPCKHQDQ t3, t1, y3

// LOADROW puts lane i's block DX bytes into its message in zi.
#define LOADROW(i, zi) \
	MOVQ      (G_FULL+i*8)(DI), AX; \
	VMOVDQU32 (AX)(DX*1), zi

// PADROW puts in zi lane i's last bytes (the rest after its whole blocks,
// at R10 into the message) and the 0x80 after them, zeros elsewhere: the
// 0x80 and zeros come from sha256xPad (R13 is the address of its 0x80),
// and a masked load over them reads the rest and nothing past it.
#define PADROW(i, zi) \
	MOVQ      (G_FULL+i*8)(DI), SI; \
	ADDQ      R10, SI; \
	MOVQ      (G_REST+i*8)(DI), CX; \
	MOVQ      R13, AX; \
	SUBQ      CX, AX; \
	VMOVDQU32 (AX), zi; \
	MOVQ      $1, R11; \
	SHLQ      CX, R11; \
	DECQ      R11; \
	KMOVQ     R11, K1; \
	VMOVDQU8  (SI), K1, zi

// LENGTHS sets the message words 14 and 15 of a last block, whose bytes
// 56-63 are the message's length in bits, big-endian: word 14 of lane i
// is the high half of grp.bits[i], word 15 the low half.
#define LENGTHS \
	VMOVDQU32 sha256xHalves<>+64(SB), Z24; \
	VMOVDQU32 sha256xHalves<>+0(SB), Z25; \
	VMOVDQU64 G_BITS(DI), Z14; \
	VMOVDQU64 G_BITS(DI), Z15; \
	VPERMT2D  G_BITS+64(DI), Z24, Z14; \
	VPERMT2D  G_BITS+64(DI), Z25, Z15

// UNPACK1 interleaves the dwords of two rows, UNPACK2 the qwords of two
// of those results; SHUF4 pairs 128-bit lanes of two registers.
#define UNPACK1(x, y, lo, hi) \
	VPUNPCKLDQ y, x, lo; \
	VPUNPCKHDQ y, x, hi

#define UNPACK2(x, y, lo, hi) \
	VPUNPCKLQDQ y, x, lo; \
	VPUNPCKHQDQ y, x, hi

#define SHUF4(x, y, imm, out) \
	VSHUFI32X4 imm, y, x, out

// sha256Group offsets: sixteen state addresses, message addresses, rest
// lengths, bit lengths and digest addresses, then the state before a block
// (word-major).
#define G_H 0
#define G_FULL 128
#define G_REST 256
#define G_BITS 384
#define G_DST 512
#define G_SAVED 640

// func sha256x16(grp *sha256Group, nfull, npad int, iv bool)
//
// Computes sixteen sums at once: lane i starts from the state at grp.h[i],
// runs the nfull whole blocks at grp.full[i], then npad (1 or 2) blocks of
// the grp.rest[i] bytes after them padded with the length grp.bits[i],
// and writes the digest to grp.dst[i]. With iv, every grp.h[i] is the
// initial state and is not read.
TEXT ·sha256x16(SB), NOSPLIT, $0-25
	MOVQ grp+0(FP), DI
	MOVQ nfull+8(FP), R8
	MOVQ npad+16(FP), BX
	ADDQ R8, BX
	MOVQ R8, R10
	SHLQ $6, R10
	LEAQ sha256xPad<>+64(SB), R13

	// The states in: with iv, every lane's is the initial state.
	MOVBQZX iv+24(FP), AX
	TESTQ   AX, AX
	JZ      states
	VPBROADCASTD ·sha256IV+0(SB), Z16
	VPBROADCASTD ·sha256IV+4(SB), Z17
	VPBROADCASTD ·sha256IV+8(SB), Z18
	VPBROADCASTD ·sha256IV+12(SB), Z19
	VPBROADCASTD ·sha256IV+16(SB), Z20
	VPBROADCASTD ·sha256IV+20(SB), Z21
	VPBROADCASTD ·sha256IV+24(SB), Z22
	VPBROADCASTD ·sha256IV+28(SB), Z23
	JMP          first

states:
	// Otherwise lane 4k+m's words 0-3 go to 128-bit lane k of
	// Z24+m, its words 4-7 to that of Z28+m; a 4x4 transpose in each
	// 128-bit lane then leaves word j of every lane in Z16+j.
	MOVQ         G_H+0(DI), AX
	VINSERTI32X4 $0, (AX), Z24, Z24
	VINSERTI32X4 $0, 16(AX), Z28, Z28
	MOVQ         G_H+8(DI), AX
	VINSERTI32X4 $0, (AX), Z25, Z25
	VINSERTI32X4 $0, 16(AX), Z29, Z29
	MOVQ         G_H+16(DI), AX
	VINSERTI32X4 $0, (AX), Z26, Z26
	VINSERTI32X4 $0, 16(AX), Z30, Z30
	MOVQ         G_H+24(DI), AX
	VINSERTI32X4 $0, (AX), Z27, Z27
	VINSERTI32X4 $0, 16(AX), Z31, Z31
	MOVQ         G_H+32(DI), AX
	VINSERTI32X4 $1, (AX), Z24, Z24
	VINSERTI32X4 $1, 16(AX), Z28, Z28
	MOVQ         G_H+40(DI), AX
	VINSERTI32X4 $1, (AX), Z25, Z25
	VINSERTI32X4 $1, 16(AX), Z29, Z29
	MOVQ         G_H+48(DI), AX
	VINSERTI32X4 $1, (AX), Z26, Z26
	VINSERTI32X4 $1, 16(AX), Z30, Z30
	MOVQ         G_H+56(DI), AX
	VINSERTI32X4 $1, (AX), Z27, Z27
	VINSERTI32X4 $1, 16(AX), Z31, Z31
	MOVQ         G_H+64(DI), AX
	VINSERTI32X4 $2, (AX), Z24, Z24
	VINSERTI32X4 $2, 16(AX), Z28, Z28
	MOVQ         G_H+72(DI), AX
	VINSERTI32X4 $2, (AX), Z25, Z25
	VINSERTI32X4 $2, 16(AX), Z29, Z29
	MOVQ         G_H+80(DI), AX
	VINSERTI32X4 $2, (AX), Z26, Z26
	VINSERTI32X4 $2, 16(AX), Z30, Z30
	MOVQ         G_H+88(DI), AX
	VINSERTI32X4 $2, (AX), Z27, Z27
	VINSERTI32X4 $2, 16(AX), Z31, Z31
	MOVQ         G_H+96(DI), AX
	VINSERTI32X4 $3, (AX), Z24, Z24
	VINSERTI32X4 $3, 16(AX), Z28, Z28
	MOVQ         G_H+104(DI), AX
	VINSERTI32X4 $3, (AX), Z25, Z25
	VINSERTI32X4 $3, 16(AX), Z29, Z29
	MOVQ         G_H+112(DI), AX
	VINSERTI32X4 $3, (AX), Z26, Z26
	VINSERTI32X4 $3, 16(AX), Z30, Z30
	MOVQ         G_H+120(DI), AX
	VINSERTI32X4 $3, (AX), Z27, Z27
	VINSERTI32X4 $3, 16(AX), Z31, Z31
	TRANS4(Z24, Z25, Z26, Z27, Z16, Z17, Z18, Z19, Z0, Z1, Z2, Z3)
	TRANS4(Z28, Z29, Z30, Z31, Z20, Z21, Z22, Z23, Z0, Z1, Z2, Z3)

first:
	XORQ R9, R9

step:
	VMOVDQU32 Z16, G_SAVED+0(DI)
	VMOVDQU32 Z17, G_SAVED+64(DI)
	VMOVDQU32 Z18, G_SAVED+128(DI)
	VMOVDQU32 Z19, G_SAVED+192(DI)
	VMOVDQU32 Z20, G_SAVED+256(DI)
	VMOVDQU32 Z21, G_SAVED+320(DI)
	VMOVDQU32 Z22, G_SAVED+384(DI)
	VMOVDQU32 Z23, G_SAVED+448(DI)

	// Block R9 of every lane into Z0-Z15, one row a lane: a whole block in
	// place, the first padded block (its length in after the transpose
	// with R12 set) or the second (no rows: all zeros but the length).
	XORQ R12, R12
	CMPQ R9, R8
	JGE  padded
	MOVQ R9, DX
	SHLQ $6, DX
	LOADROW(0, Z0)
	LOADROW(1, Z1)
	LOADROW(2, Z2)
	LOADROW(3, Z3)
	LOADROW(4, Z4)
	LOADROW(5, Z5)
	LOADROW(6, Z6)
	LOADROW(7, Z7)
	LOADROW(8, Z8)
	LOADROW(9, Z9)
	LOADROW(10, Z10)
	LOADROW(11, Z11)
	LOADROW(12, Z12)
	LOADROW(13, Z13)
	LOADROW(14, Z14)
	LOADROW(15, Z15)
	JMP  transpose

padded:
	JNE padB
	PADROW(0, Z0)
	PADROW(1, Z1)
	PADROW(2, Z2)
	PADROW(3, Z3)
	PADROW(4, Z4)
	PADROW(5, Z5)
	PADROW(6, Z6)
	PADROW(7, Z7)
	PADROW(8, Z8)
	PADROW(9, Z9)
	PADROW(10, Z10)
	PADROW(11, Z11)
	PADROW(12, Z12)
	PADROW(13, Z13)
	PADROW(14, Z14)
	PADROW(15, Z15)
	MOVQ BX, AX
	SUBQ R8, AX
	CMPQ AX, $1
	JNE  transpose
	MOVQ $1, R12
	JMP  transpose

padB:
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7
	VPXORD Z8, Z8, Z8
	VPXORD Z9, Z9, Z9
	VPXORD Z10, Z10, Z10
	VPXORD Z11, Z11, Z11
	VPXORD Z12, Z12, Z12
	VPXORD Z13, Z13, Z13
	LENGTHS
	JMP words

transpose:
	// A 16x16 dword transpose in four passes of two-source shuffles,
	// so that Zj holds word j of every lane.
	UNPACK1(Z0, Z1, Z16, Z17)
	UNPACK1(Z2, Z3, Z18, Z19)
	UNPACK1(Z4, Z5, Z20, Z21)
	UNPACK1(Z6, Z7, Z22, Z23)
	UNPACK1(Z8, Z9, Z24, Z25)
	UNPACK1(Z10, Z11, Z26, Z27)
	UNPACK1(Z12, Z13, Z28, Z29)
	UNPACK1(Z14, Z15, Z30, Z31)
	UNPACK2(Z16, Z18, Z0, Z1)
	UNPACK2(Z17, Z19, Z2, Z3)
	UNPACK2(Z20, Z22, Z4, Z5)
	UNPACK2(Z21, Z23, Z6, Z7)
	UNPACK2(Z24, Z26, Z8, Z9)
	UNPACK2(Z25, Z27, Z10, Z11)
	UNPACK2(Z28, Z30, Z12, Z13)
	UNPACK2(Z29, Z31, Z14, Z15)
	SHUF4(Z0, Z4, $0x44, Z16)
	SHUF4(Z0, Z4, $0xee, Z17)
	SHUF4(Z8, Z12, $0x44, Z18)
	SHUF4(Z8, Z12, $0xee, Z19)
	SHUF4(Z1, Z5, $0x44, Z20)
	SHUF4(Z1, Z5, $0xee, Z21)
	SHUF4(Z9, Z13, $0x44, Z22)
	SHUF4(Z9, Z13, $0xee, Z23)
	SHUF4(Z2, Z6, $0x44, Z24)
	SHUF4(Z2, Z6, $0xee, Z25)
	SHUF4(Z10, Z14, $0x44, Z26)
	SHUF4(Z10, Z14, $0xee, Z27)
	SHUF4(Z3, Z7, $0x44, Z28)
	SHUF4(Z3, Z7, $0xee, Z29)
	SHUF4(Z11, Z15, $0x44, Z30)
	SHUF4(Z11, Z15, $0xee, Z31)
	SHUF4(Z16, Z18, $0x88, Z0)
	SHUF4(Z16, Z18, $0xdd, Z4)
	SHUF4(Z17, Z19, $0x88, Z8)
	SHUF4(Z17, Z19, $0xdd, Z12)
	SHUF4(Z20, Z22, $0x88, Z1)
	SHUF4(Z20, Z22, $0xdd, Z5)
	SHUF4(Z21, Z23, $0x88, Z9)
	SHUF4(Z21, Z23, $0xdd, Z13)
	SHUF4(Z24, Z26, $0x88, Z2)
	SHUF4(Z24, Z26, $0xdd, Z6)
	SHUF4(Z25, Z27, $0x88, Z10)
	SHUF4(Z25, Z27, $0xdd, Z14)
	SHUF4(Z28, Z30, $0x88, Z3)
	SHUF4(Z28, Z30, $0xdd, Z7)
	SHUF4(Z29, Z31, $0x88, Z11)
	SHUF4(Z29, Z31, $0xdd, Z15)
	VBROADCASTI32X4 ·sha256Flip(SB), Z16
	VPSHUFB   Z16, Z0, Z0
	VPSHUFB   Z16, Z1, Z1
	VPSHUFB   Z16, Z2, Z2
	VPSHUFB   Z16, Z3, Z3
	VPSHUFB   Z16, Z4, Z4
	VPSHUFB   Z16, Z5, Z5
	VPSHUFB   Z16, Z6, Z6
	VPSHUFB   Z16, Z7, Z7
	VPSHUFB   Z16, Z8, Z8
	VPSHUFB   Z16, Z9, Z9
	VPSHUFB   Z16, Z10, Z10
	VPSHUFB   Z16, Z11, Z11
	VPSHUFB   Z16, Z12, Z12
	VPSHUFB   Z16, Z13, Z13
	VPSHUFB   Z16, Z14, Z14
	VPSHUFB   Z16, Z15, Z15
	TESTQ R12, R12
	JZ    words
	LENGTHS

words:
	VMOVDQU32 G_SAVED+0(DI), Z16
	VMOVDQU32 G_SAVED+64(DI), Z17
	VMOVDQU32 G_SAVED+128(DI), Z18
	VMOVDQU32 G_SAVED+192(DI), Z19
	VMOVDQU32 G_SAVED+256(DI), Z20
	VMOVDQU32 G_SAVED+320(DI), Z21
	VMOVDQU32 G_SAVED+384(DI), Z22
	VMOVDQU32 G_SAVED+448(DI), Z23

	ROUND(Z16, Z17, Z18, Z19, Z20, Z21, Z22, Z23, Z0, 0)
	ROUND(Z23, Z16, Z17, Z18, Z19, Z20, Z21, Z22, Z1, 1)
	ROUND(Z22, Z23, Z16, Z17, Z18, Z19, Z20, Z21, Z2, 2)
	ROUND(Z21, Z22, Z23, Z16, Z17, Z18, Z19, Z20, Z3, 3)
	ROUND(Z20, Z21, Z22, Z23, Z16, Z17, Z18, Z19, Z4, 4)
	ROUND(Z19, Z20, Z21, Z22, Z23, Z16, Z17, Z18, Z5, 5)
	ROUND(Z18, Z19, Z20, Z21, Z22, Z23, Z16, Z17, Z6, 6)
	ROUND(Z17, Z18, Z19, Z20, Z21, Z22, Z23, Z16, Z7, 7)
	ROUND(Z16, Z17, Z18, Z19, Z20, Z21, Z22, Z23, Z8, 8)
	ROUND(Z23, Z16, Z17, Z18, Z19, Z20, Z21, Z22, Z9, 9)
	ROUND(Z22, Z23, Z16, Z17, Z18, Z19, Z20, Z21, Z10, 10)
	ROUND(Z21, Z22, Z23, Z16, Z17, Z18, Z19, Z20, Z11, 11)
	ROUND(Z20, Z21, Z22, Z23, Z16, Z17, Z18, Z19, Z12, 12)
	ROUND(Z19, Z20, Z21, Z22, Z23, Z16, Z17, Z18, Z13, 13)
	ROUND(Z18, Z19, Z20, Z21, Z22, Z23, Z16, Z17, Z14, 14)
	ROUND(Z17, Z18, Z19, Z20, Z21, Z22, Z23, Z16, Z15, 15)
	SCHED(Z0, Z1, Z9, Z14)
	ROUND(Z16, Z17, Z18, Z19, Z20, Z21, Z22, Z23, Z0, 16)
	SCHED(Z1, Z2, Z10, Z15)
	ROUND(Z23, Z16, Z17, Z18, Z19, Z20, Z21, Z22, Z1, 17)
	SCHED(Z2, Z3, Z11, Z0)
	ROUND(Z22, Z23, Z16, Z17, Z18, Z19, Z20, Z21, Z2, 18)
	SCHED(Z3, Z4, Z12, Z1)
	ROUND(Z21, Z22, Z23, Z16, Z17, Z18, Z19, Z20, Z3, 19)
	SCHED(Z4, Z5, Z13, Z2)
	ROUND(Z20, Z21, Z22, Z23, Z16, Z17, Z18, Z19, Z4, 20)
	SCHED(Z5, Z6, Z14, Z3)
	ROUND(Z19, Z20, Z21, Z22, Z23, Z16, Z17, Z18, Z5, 21)
	SCHED(Z6, Z7, Z15, Z4)
	ROUND(Z18, Z19, Z20, Z21, Z22, Z23, Z16, Z17, Z6, 22)
	SCHED(Z7, Z8, Z0, Z5)
	ROUND(Z17, Z18, Z19, Z20, Z21, Z22, Z23, Z16, Z7, 23)
	SCHED(Z8, Z9, Z1, Z6)
	ROUND(Z16, Z17, Z18, Z19, Z20, Z21, Z22, Z23, Z8, 24)
	SCHED(Z9, Z10, Z2, Z7)
	ROUND(Z23, Z16, Z17, Z18, Z19, Z20, Z21, Z22, Z9, 25)
	SCHED(Z10, Z11, Z3, Z8)
	ROUND(Z22, Z23, Z16, Z17, Z18, Z19, Z20, Z21, Z10, 26)
	SCHED(Z11, Z12, Z4, Z9)
	ROUND(Z21, Z22, Z23, Z16, Z17, Z18, Z19, Z20, Z11, 27)
	SCHED(Z12, Z13, Z5, Z10)
	ROUND(Z20, Z21, Z22, Z23, Z16, Z17, Z18, Z19, Z12, 28)
	SCHED(Z13, Z14, Z6, Z11)
	ROUND(Z19, Z20, Z21, Z22, Z23, Z16, Z17, Z18, Z13, 29)
	SCHED(Z14, Z15, Z7, Z12)
	ROUND(Z18, Z19, Z20, Z21, Z22, Z23, Z16, Z17, Z14, 30)
	SCHED(Z15, Z0, Z8, Z13)
	ROUND(Z17, Z18, Z19, Z20, Z21, Z22, Z23, Z16, Z15, 31)
	SCHED(Z0, Z1, Z9, Z14)
	ROUND(Z16, Z17, Z18, Z19, Z20, Z21, Z22, Z23, Z0, 32)
	SCHED(Z1, Z2, Z10, Z15)
	ROUND(Z23, Z16, Z17, Z18, Z19, Z20, Z21, Z22, Z1, 33)
	SCHED(Z2, Z3, Z11, Z0)
	ROUND(Z22, Z23, Z16, Z17, Z18, Z19, Z20, Z21, Z2, 34)
	SCHED(Z3, Z4, Z12, Z1)
	ROUND(Z21, Z22, Z23, Z16, Z17, Z18, Z19, Z20, Z3, 35)
	SCHED(Z4, Z5, Z13, Z2)
	ROUND(Z20, Z21, Z22, Z23, Z16, Z17, Z18, Z19, Z4, 36)
	SCHED(Z5, Z6, Z14, Z3)
	ROUND(Z19, Z20, Z21, Z22, Z23, Z16, Z17, Z18, Z5, 37)
	SCHED(Z6, Z7, Z15, Z4)
	ROUND(Z18, Z19, Z20, Z21, Z22, Z23, Z16, Z17, Z6, 38)
	SCHED(Z7, Z8, Z0, Z5)
	ROUND(Z17, Z18, Z19, Z20, Z21, Z22, Z23, Z16, Z7, 39)
	SCHED(Z8, Z9, Z1, Z6)
	ROUND(Z16, Z17, Z18, Z19, Z20, Z21, Z22, Z23, Z8, 40)
	SCHED(Z9, Z10, Z2, Z7)
	ROUND(Z23, Z16, Z17, Z18, Z19, Z20, Z21, Z22, Z9, 41)
	SCHED(Z10, Z11, Z3, Z8)
	ROUND(Z22, Z23, Z16, Z17, Z18, Z19, Z20, Z21, Z10, 42)
	SCHED(Z11, Z12, Z4, Z9)
	ROUND(Z21, Z22, Z23, Z16, Z17, Z18, Z19, Z20, Z11, 43)
	SCHED(Z12, Z13, Z5, Z10)
	ROUND(Z20, Z21, Z22, Z23, Z16, Z17, Z18, Z19, Z12, 44)
	SCHED(Z13, Z14, Z6, Z11)
	ROUND(Z19, Z20, Z21, Z22, Z23, Z16, Z17, Z18, Z13, 45)
	SCHED(Z14, Z15, Z7, Z12)
	ROUND(Z18, Z19, Z20, Z21, Z22, Z23, Z16, Z17, Z14, 46)
	SCHED(Z15, Z0, Z8, Z13)
	ROUND(Z17, Z18, Z19, Z20, Z21, Z22, Z23, Z16, Z15, 47)
	SCHED(Z0, Z1, Z9, Z14)
	ROUND(Z16, Z17, Z18, Z19, Z20, Z21, Z22, Z23, Z0, 48)
	SCHED(Z1, Z2, Z10, Z15)
	ROUND(Z23, Z16, Z17, Z18, Z19, Z20, Z21, Z22, Z1, 49)
	SCHED(Z2, Z3, Z11, Z0)
	ROUND(Z22, Z23, Z16, Z17, Z18, Z19, Z20, Z21, Z2, 50)
	SCHED(Z3, Z4, Z12, Z1)
	ROUND(Z21, Z22, Z23, Z16, Z17, Z18, Z19, Z20, Z3, 51)
	SCHED(Z4, Z5, Z13, Z2)
	ROUND(Z20, Z21, Z22, Z23, Z16, Z17, Z18, Z19, Z4, 52)
	SCHED(Z5, Z6, Z14, Z3)
	ROUND(Z19, Z20, Z21, Z22, Z23, Z16, Z17, Z18, Z5, 53)
	SCHED(Z6, Z7, Z15, Z4)
	ROUND(Z18, Z19, Z20, Z21, Z22, Z23, Z16, Z17, Z6, 54)
	SCHED(Z7, Z8, Z0, Z5)
	ROUND(Z17, Z18, Z19, Z20, Z21, Z22, Z23, Z16, Z7, 55)
	SCHED(Z8, Z9, Z1, Z6)
	ROUND(Z16, Z17, Z18, Z19, Z20, Z21, Z22, Z23, Z8, 56)
	SCHED(Z9, Z10, Z2, Z7)
	ROUND(Z23, Z16, Z17, Z18, Z19, Z20, Z21, Z22, Z9, 57)
	SCHED(Z10, Z11, Z3, Z8)
	ROUND(Z22, Z23, Z16, Z17, Z18, Z19, Z20, Z21, Z10, 58)
	SCHED(Z11, Z12, Z4, Z9)
	ROUND(Z21, Z22, Z23, Z16, Z17, Z18, Z19, Z20, Z11, 59)
	SCHED(Z12, Z13, Z5, Z10)
	ROUND(Z20, Z21, Z22, Z23, Z16, Z17, Z18, Z19, Z12, 60)
	SCHED(Z13, Z14, Z6, Z11)
	ROUND(Z19, Z20, Z21, Z22, Z23, Z16, Z17, Z18, Z13, 61)
	SCHED(Z14, Z15, Z7, Z12)
	ROUND(Z18, Z19, Z20, Z21, Z22, Z23, Z16, Z17, Z14, 62)
	SCHED(Z15, Z0, Z8, Z13)
	ROUND(Z17, Z18, Z19, Z20, Z21, Z22, Z23, Z16, Z15, 63)

	// Each lane's state grows by its working variables.
	VPADDD G_SAVED+0(DI), Z16, Z16
	VPADDD G_SAVED+64(DI), Z17, Z17
	VPADDD G_SAVED+128(DI), Z18, Z18
	VPADDD G_SAVED+192(DI), Z19, Z19
	VPADDD G_SAVED+256(DI), Z20, Z20
	VPADDD G_SAVED+320(DI), Z21, Z21
	VPADDD G_SAVED+384(DI), Z22, Z22
	VPADDD G_SAVED+448(DI), Z23, Z23

	INCQ R9
	CMPQ R9, BX
	JLT  step

	// The digests out: the transpose of the way in, each word then
	// byte-swapped to big-endian.
	TRANS4(Z16, Z17, Z18, Z19, Z24, Z25, Z26, Z27, Z0, Z1, Z2, Z3)
	TRANS4(Z20, Z21, Z22, Z23, Z28, Z29, Z30, Z31, Z0, Z1, Z2, Z3)
	VBROADCASTI32X4 ·sha256Flip(SB), Z0
	VPSHUFB   Z0, Z24, Z24
	VPSHUFB   Z0, Z25, Z25
	VPSHUFB   Z0, Z26, Z26
	VPSHUFB   Z0, Z27, Z27
	VPSHUFB   Z0, Z28, Z28
	VPSHUFB   Z0, Z29, Z29
	VPSHUFB   Z0, Z30, Z30
	VPSHUFB   Z0, Z31, Z31
	MOVQ          G_DST+0(DI), AX
	VEXTRACTI32X4 $0, Z24, (AX)
	VEXTRACTI32X4 $0, Z28, 16(AX)
	MOVQ          G_DST+8(DI), AX
	VEXTRACTI32X4 $0, Z25, (AX)
	VEXTRACTI32X4 $0, Z29, 16(AX)
	MOVQ          G_DST+16(DI), AX
	VEXTRACTI32X4 $0, Z26, (AX)
	VEXTRACTI32X4 $0, Z30, 16(AX)
	MOVQ          G_DST+24(DI), AX
	VEXTRACTI32X4 $0, Z27, (AX)
	VEXTRACTI32X4 $0, Z31, 16(AX)
	MOVQ          G_DST+32(DI), AX
	VEXTRACTI32X4 $1, Z24, (AX)
	VEXTRACTI32X4 $1, Z28, 16(AX)
	MOVQ          G_DST+40(DI), AX
	VEXTRACTI32X4 $1, Z25, (AX)
	VEXTRACTI32X4 $1, Z29, 16(AX)
	MOVQ          G_DST+48(DI), AX
	VEXTRACTI32X4 $1, Z26, (AX)
	VEXTRACTI32X4 $1, Z30, 16(AX)
	MOVQ          G_DST+56(DI), AX
	VEXTRACTI32X4 $1, Z27, (AX)
	VEXTRACTI32X4 $1, Z31, 16(AX)
	MOVQ          G_DST+64(DI), AX
	VEXTRACTI32X4 $2, Z24, (AX)
	VEXTRACTI32X4 $2, Z28, 16(AX)
	MOVQ          G_DST+72(DI), AX
	VEXTRACTI32X4 $2, Z25, (AX)
	VEXTRACTI32X4 $2, Z29, 16(AX)
	MOVQ          G_DST+80(DI), AX
	VEXTRACTI32X4 $2, Z26, (AX)
	VEXTRACTI32X4 $2, Z30, 16(AX)
	MOVQ          G_DST+88(DI), AX
	VEXTRACTI32X4 $2, Z27, (AX)
	VEXTRACTI32X4 $2, Z31, 16(AX)
	MOVQ          G_DST+96(DI), AX
	VEXTRACTI32X4 $3, Z24, (AX)
	VEXTRACTI32X4 $3, Z28, 16(AX)
	MOVQ          G_DST+104(DI), AX
	VEXTRACTI32X4 $3, Z25, (AX)
	VEXTRACTI32X4 $3, Z29, 16(AX)
	MOVQ          G_DST+112(DI), AX
	VEXTRACTI32X4 $3, Z26, (AX)
	VEXTRACTI32X4 $3, Z30, 16(AX)
	MOVQ          G_DST+120(DI), AX
	VEXTRACTI32X4 $3, Z27, (AX)
	VEXTRACTI32X4 $3, Z31, 16(AX)
	VZEROUPPER
	RET
