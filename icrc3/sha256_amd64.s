// The SHA-NI rounds and their constants are Go's own
// (crypto/internal/fips140/sha256, generated there by avo; the constants
// and byte-swap mask are read by sha256x16_amd64.s too), here in a macro
// used by a block function the block hashes drive without crypto/sha256's
// per-call state copies.
// Copyright 2017 The Go Authors. All rights reserved. Use of this source
// code is governed by the BSD-style license of the Go distribution.

//go:build amd64 && !purego

#include "textflag.h"


DATA ·sha256Flip+0(SB)/8, $0x0405060700010203
DATA ·sha256Flip+8(SB)/8, $0x0c0d0e0f08090a0b
DATA ·sha256Flip+16(SB)/8, $0x0405060700010203
DATA ·sha256Flip+24(SB)/8, $0x0c0d0e0f08090a0b
GLOBL ·sha256Flip(SB), RODATA|NOPTR, $32


DATA ·sha256K+0(SB)/4, $0x428a2f98
DATA ·sha256K+4(SB)/4, $0x71374491
DATA ·sha256K+8(SB)/4, $0xb5c0fbcf
DATA ·sha256K+12(SB)/4, $0xe9b5dba5
DATA ·sha256K+16(SB)/4, $0x428a2f98
DATA ·sha256K+20(SB)/4, $0x71374491
DATA ·sha256K+24(SB)/4, $0xb5c0fbcf
DATA ·sha256K+28(SB)/4, $0xe9b5dba5
DATA ·sha256K+32(SB)/4, $0x3956c25b
DATA ·sha256K+36(SB)/4, $0x59f111f1
DATA ·sha256K+40(SB)/4, $0x923f82a4
DATA ·sha256K+44(SB)/4, $0xab1c5ed5
DATA ·sha256K+48(SB)/4, $0x3956c25b
DATA ·sha256K+52(SB)/4, $0x59f111f1
DATA ·sha256K+56(SB)/4, $0x923f82a4
DATA ·sha256K+60(SB)/4, $0xab1c5ed5
DATA ·sha256K+64(SB)/4, $0xd807aa98
DATA ·sha256K+68(SB)/4, $0x12835b01
DATA ·sha256K+72(SB)/4, $0x243185be
DATA ·sha256K+76(SB)/4, $0x550c7dc3
DATA ·sha256K+80(SB)/4, $0xd807aa98
DATA ·sha256K+84(SB)/4, $0x12835b01
DATA ·sha256K+88(SB)/4, $0x243185be
DATA ·sha256K+92(SB)/4, $0x550c7dc3
DATA ·sha256K+96(SB)/4, $0x72be5d74
DATA ·sha256K+100(SB)/4, $0x80deb1fe
DATA ·sha256K+104(SB)/4, $0x9bdc06a7
DATA ·sha256K+108(SB)/4, $0xc19bf174
DATA ·sha256K+112(SB)/4, $0x72be5d74
DATA ·sha256K+116(SB)/4, $0x80deb1fe
DATA ·sha256K+120(SB)/4, $0x9bdc06a7
DATA ·sha256K+124(SB)/4, $0xc19bf174
DATA ·sha256K+128(SB)/4, $0xe49b69c1
DATA ·sha256K+132(SB)/4, $0xefbe4786
DATA ·sha256K+136(SB)/4, $0x0fc19dc6
DATA ·sha256K+140(SB)/4, $0x240ca1cc
DATA ·sha256K+144(SB)/4, $0xe49b69c1
DATA ·sha256K+148(SB)/4, $0xefbe4786
DATA ·sha256K+152(SB)/4, $0x0fc19dc6
DATA ·sha256K+156(SB)/4, $0x240ca1cc
DATA ·sha256K+160(SB)/4, $0x2de92c6f
DATA ·sha256K+164(SB)/4, $0x4a7484aa
DATA ·sha256K+168(SB)/4, $0x5cb0a9dc
DATA ·sha256K+172(SB)/4, $0x76f988da
DATA ·sha256K+176(SB)/4, $0x2de92c6f
DATA ·sha256K+180(SB)/4, $0x4a7484aa
DATA ·sha256K+184(SB)/4, $0x5cb0a9dc
DATA ·sha256K+188(SB)/4, $0x76f988da
DATA ·sha256K+192(SB)/4, $0x983e5152
DATA ·sha256K+196(SB)/4, $0xa831c66d
DATA ·sha256K+200(SB)/4, $0xb00327c8
DATA ·sha256K+204(SB)/4, $0xbf597fc7
DATA ·sha256K+208(SB)/4, $0x983e5152
DATA ·sha256K+212(SB)/4, $0xa831c66d
DATA ·sha256K+216(SB)/4, $0xb00327c8
DATA ·sha256K+220(SB)/4, $0xbf597fc7
DATA ·sha256K+224(SB)/4, $0xc6e00bf3
DATA ·sha256K+228(SB)/4, $0xd5a79147
DATA ·sha256K+232(SB)/4, $0x06ca6351
DATA ·sha256K+236(SB)/4, $0x14292967
DATA ·sha256K+240(SB)/4, $0xc6e00bf3
DATA ·sha256K+244(SB)/4, $0xd5a79147
DATA ·sha256K+248(SB)/4, $0x06ca6351
DATA ·sha256K+252(SB)/4, $0x14292967
DATA ·sha256K+256(SB)/4, $0x27b70a85
DATA ·sha256K+260(SB)/4, $0x2e1b2138
DATA ·sha256K+264(SB)/4, $0x4d2c6dfc
DATA ·sha256K+268(SB)/4, $0x53380d13
DATA ·sha256K+272(SB)/4, $0x27b70a85
DATA ·sha256K+276(SB)/4, $0x2e1b2138
DATA ·sha256K+280(SB)/4, $0x4d2c6dfc
DATA ·sha256K+284(SB)/4, $0x53380d13
DATA ·sha256K+288(SB)/4, $0x650a7354
DATA ·sha256K+292(SB)/4, $0x766a0abb
DATA ·sha256K+296(SB)/4, $0x81c2c92e
DATA ·sha256K+300(SB)/4, $0x92722c85
DATA ·sha256K+304(SB)/4, $0x650a7354
DATA ·sha256K+308(SB)/4, $0x766a0abb
DATA ·sha256K+312(SB)/4, $0x81c2c92e
DATA ·sha256K+316(SB)/4, $0x92722c85
DATA ·sha256K+320(SB)/4, $0xa2bfe8a1
DATA ·sha256K+324(SB)/4, $0xa81a664b
DATA ·sha256K+328(SB)/4, $0xc24b8b70
DATA ·sha256K+332(SB)/4, $0xc76c51a3
DATA ·sha256K+336(SB)/4, $0xa2bfe8a1
DATA ·sha256K+340(SB)/4, $0xa81a664b
DATA ·sha256K+344(SB)/4, $0xc24b8b70
DATA ·sha256K+348(SB)/4, $0xc76c51a3
DATA ·sha256K+352(SB)/4, $0xd192e819
DATA ·sha256K+356(SB)/4, $0xd6990624
DATA ·sha256K+360(SB)/4, $0xf40e3585
DATA ·sha256K+364(SB)/4, $0x106aa070
DATA ·sha256K+368(SB)/4, $0xd192e819
DATA ·sha256K+372(SB)/4, $0xd6990624
DATA ·sha256K+376(SB)/4, $0xf40e3585
DATA ·sha256K+380(SB)/4, $0x106aa070
DATA ·sha256K+384(SB)/4, $0x19a4c116
DATA ·sha256K+388(SB)/4, $0x1e376c08
DATA ·sha256K+392(SB)/4, $0x2748774c
DATA ·sha256K+396(SB)/4, $0x34b0bcb5
DATA ·sha256K+400(SB)/4, $0x19a4c116
DATA ·sha256K+404(SB)/4, $0x1e376c08
DATA ·sha256K+408(SB)/4, $0x2748774c
DATA ·sha256K+412(SB)/4, $0x34b0bcb5
DATA ·sha256K+416(SB)/4, $0x391c0cb3
DATA ·sha256K+420(SB)/4, $0x4ed8aa4a
DATA ·sha256K+424(SB)/4, $0x5b9cca4f
DATA ·sha256K+428(SB)/4, $0x682e6ff3
DATA ·sha256K+432(SB)/4, $0x391c0cb3
DATA ·sha256K+436(SB)/4, $0x4ed8aa4a
DATA ·sha256K+440(SB)/4, $0x5b9cca4f
DATA ·sha256K+444(SB)/4, $0x682e6ff3
DATA ·sha256K+448(SB)/4, $0x748f82ee
DATA ·sha256K+452(SB)/4, $0x78a5636f
DATA ·sha256K+456(SB)/4, $0x84c87814
DATA ·sha256K+460(SB)/4, $0x8cc70208
DATA ·sha256K+464(SB)/4, $0x748f82ee
DATA ·sha256K+468(SB)/4, $0x78a5636f
DATA ·sha256K+472(SB)/4, $0x84c87814
DATA ·sha256K+476(SB)/4, $0x8cc70208
DATA ·sha256K+480(SB)/4, $0x90befffa
DATA ·sha256K+484(SB)/4, $0xa4506ceb
DATA ·sha256K+488(SB)/4, $0xbef9a3f7
DATA ·sha256K+492(SB)/4, $0xc67178f2
DATA ·sha256K+496(SB)/4, $0x90befffa
DATA ·sha256K+500(SB)/4, $0xa4506ceb
DATA ·sha256K+504(SB)/4, $0xbef9a3f7
DATA ·sha256K+508(SB)/4, $0xc67178f2
GLOBL ·sha256K(SB), RODATA|NOPTR, $512


// PLAIN is four rounds on the message word a with the constants at
// koff(AX), without scheduling.
#define PLAIN(koff, a) \
	VMOVDQA     a, X0; \
	PADDD       koff(AX), X0; \
	SHA256RNDS2 X0, X1, X2; \
	PSHUFD      $0x0e, X0, X0; \
	SHA256RNDS2 X0, X2, X1

// QUAD is four of the rounds 16-59: message words a (current), b (being
// completed) and c (the one before a), constants at koff(AX). QUADM also
// starts the schedule of a later word.
#define QUAD(koff, a, b, c) \
	VMOVDQA     a, X0; \
	PADDD       koff(AX), X0; \
	SHA256RNDS2 X0, X1, X2; \
	VMOVDQA     a, X7; \
	PALIGNR     $0x04, c, X7; \
	PADDD       X7, b; \
	SHA256MSG2  a, b; \
	PSHUFD      $0x0e, X0, X0; \
	SHA256RNDS2 X0, X2, X1

#define QUADM(koff, a, b, c) \
	QUAD(koff, a, b, c); \
	SHA256MSG1  a, c

// SIXTEEN is sixteen of the rounds 16-47, the words' roles rotated once.
#define SIXTEEN(koff) \
	QUADM(koff, X6, X3, X5); \
	QUADM(koff+32, X3, X4, X6); \
	QUADM(koff+64, X4, X5, X3); \
	QUADM(koff+96, X5, X6, X4)

// ROUNDS runs the 64 rounds of one block whose message words, byte-swapped,
// are in X3-X6, on the state in X1 (ABEF) and X2 (CDGH), with AX at K256.
// Clobbers X0 and X3-X7.
#define ROUNDS \
	PLAIN(0, X3); \
	PLAIN(32, X4); \
	SHA256MSG1 X4, X3; \
	PLAIN(64, X5); \
	SHA256MSG1 X5, X4; \
	SIXTEEN(96); \
	SIXTEEN(224); \
	QUADM(352, X6, X3, X5); \
	QUADM(384, X3, X4, X6); \
	QUAD(416, X4, X5, X3); \
	QUAD(448, X5, X6, X4); \
	PLAIN(480, X6)

// LOADSTATE reads h[0..7] at ptr into X1 (ABEF) and X2 (CDGH).
#define LOADSTATE(ptr) \
	VMOVDQU (ptr), X1; \
	VMOVDQU 16(ptr), X2; \
	PSHUFD  $0xb1, X1, X1; \
	PSHUFD  $0x1b, X2, X2; \
	VMOVDQA X1, X7; \
	PALIGNR $0x08, X2, X1; \
	PBLENDW $0xf0, X7, X2

// UNSHUFFLE turns X1 and X2 back into h[0..3] and h[4..7].
#define UNSHUFFLE \
	PSHUFD  $0x1b, X1, X1; \
	PSHUFD  $0xb1, X2, X2; \
	VMOVDQA X1, X7; \
	PBLENDW $0xf0, X2, X1; \
	PALIGNR $0x08, X7, X2

// func sha256BlockSHANI(h *[8]uint32, p []byte, out *Hash)
//
// Runs the len(p)/64 blocks of p on h. With out nil the state goes back to
// h; otherwise, for a message's last blocks, it goes to out as the
// big-endian digest (h is left as it was), saving the caller the eight
// byte-swapping stores; p must then not be empty.
TEXT ·sha256BlockSHANI(SB), NOSPLIT, $0-40
	MOVQ    h+0(FP), DI
	MOVQ    p_base+8(FP), SI
	MOVQ    p_len+16(FP), DX
	SHRQ    $0x06, DX
	SHLQ    $0x06, DX
	CMPQ    DX, $0x00
	JEQ     done
	ADDQ    SI, DX
	LOADSTATE(DI)
	VMOVDQA ·sha256Flip+0(SB), X8
	LEAQ    ·sha256K+0(SB), AX

roundLoop:
	// save hash values for addition after rounds
	VMOVDQA X1, X9
	VMOVDQA X2, X10
	VMOVDQU (SI), X3
	VMOVDQU 16(SI), X4
	VMOVDQU 32(SI), X5
	VMOVDQU 48(SI), X6
	PSHUFB  X8, X3
	PSHUFB  X8, X4
	PSHUFB  X8, X5
	PSHUFB  X8, X6
	ROUNDS
	PADDD   X9, X1
	PADDD   X10, X2

	// advance data pointer; loop until buffer empty
	ADDQ $0x40, SI
	CMPQ DX, SI
	JNE  roundLoop

	UNSHUFFLE
	MOVQ    out+32(FP), CX
	TESTQ   CX, CX
	JNE     digest
	VMOVDQU X1, (DI)
	VMOVDQU X2, 16(DI)

done:
	RET

digest:
	PSHUFB  X8, X1
	PSHUFB  X8, X2
	VMOVDQU X1, (CX)
	VMOVDQU X2, 16(CX)
	RET

// func cpuid(leaf, sub uint32) (eax, ebx, ecx, edx uint32)
TEXT ·cpuid(SB), NOSPLIT, $0-24
	MOVL leaf+0(FP), AX
	MOVL sub+4(FP), CX
	CPUID
	MOVL AX, eax+8(FP)
	MOVL BX, ebx+12(FP)
	MOVL CX, ecx+16(FP)
	MOVL DX, edx+20(FP)
	RET

// func xgetbv() (eax uint32)
TEXT ·xgetbv(SB), NOSPLIT, $0-4
	MOVL $0, CX
	XGETBV
	MOVL AX, eax+0(FP)
	RET
